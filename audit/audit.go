package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Events of the trail.
const (
	Proposed     = "proposed"
	Approved     = "approved"
	Denied       = "denied"
	Expired      = "expired"
	Executed     = "executed"
	JobStarted   = "job_started"
	JobFinished  = "job_finished"
	JobCancelled = "job_cancelled"
)

// Outcomes of an executed write.
const (
	OutcomeSuccess = "success"
	OutcomeError   = "error"
	OutcomeUnknown = "outcome unknown"
)

// Entry is one event of the trail.
type Entry struct {
	Time  time.Time `json:"time" yaml:"time"`
	Event string    `json:"event" yaml:"event"`
	// Actor is the label the person set (UPGRADE_AGENT_ACTOR, default
	// USER@hostname): it proves nothing.
	Actor string `json:"actor" yaml:"actor"`
	// DBUser is the database role that wrote the entry (PostgreSQL's
	// session_user, filled in by the database, never by the client); empty
	// in the file store.
	DBUser         string          `json:"db_user,omitempty" yaml:"db_user,omitempty"`
	SessionID      string          `json:"session_id" yaml:"session_id"`
	ConfirmationID string          `json:"confirmation_id,omitempty" yaml:"confirmation_id,omitempty"`
	Action         string          `json:"action,omitempty" yaml:"action,omitempty"`
	Target         string          `json:"target,omitempty" yaml:"target,omitempty"`
	ParamsHash     string          `json:"params_hash,omitempty" yaml:"params_hash,omitempty"`
	Destructive    bool            `json:"destructive,omitempty" yaml:"destructive,omitempty"`
	Outcome        string          `json:"outcome,omitempty" yaml:"outcome,omitempty"`
	JobID          string          `json:"job_id,omitempty" yaml:"job_id,omitempty"`
	Answer         json.RawMessage `json:"answer,omitempty" yaml:"-"`
	Message        string          `json:"message,omitempty" yaml:"message,omitempty"`
}

// Filter selects entries; zero fields select everything.
type Filter struct {
	SessionID string
	Actor     string
	Since     time.Time
}

// Match reports whether e passes f.
func (f Filter) Match(e Entry) bool {
	return (f.SessionID == "" || e.SessionID == f.SessionID) &&
		(f.Actor == "" || e.Actor == f.Actor) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since))
}

// Log is an audit trail: the file store's FileLog or the PostgreSQL store.
type Log interface {
	Append(e Entry) error
	// Read returns the matching entries, oldest first.
	Read(f Filter) ([]Entry, error)
}

// FileName is the trail of the file store, in the state dir.
const FileName = "audit.jsonl"

// FileLog appends entries to <state-dir>/audit.jsonl, one JSON object a
// line, each write with O_APPEND and fsync: entries of concurrent processes
// never interleave within a line (one write call per entry) and a written
// entry survives a crash.
type FileLog struct {
	path string
	mu   sync.Mutex
}

// OpenFileLog returns the trail in stateDir.
func OpenFileLog(stateDir string) *FileLog {
	return &FileLog{path: filepath.Join(stateDir, FileName)}
}

// Path is the JSONL file.
func (l *FileLog) Path() string { return l.path }

// Append writes e as one line.
func (l *FileLog) Append(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode: %w", err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		_ = f.Close()
		return fmt.Errorf("audit %s: %w", l.path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("audit %s: %w", l.path, err)
	}
	return f.Close()
}

// Read parses the file; a line that is not an entry is an error naming the
// file and line (the trail is never rewritten, so it is reported, not skipped).
func (l *FileLog) Read(flt Filter) ([]Entry, error) {
	data, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrCorrupt, l.path, n, err)
		}
		if flt.Match(e) {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit %s: %w", l.path, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// ErrCorrupt: a trail entry cannot be read.
var ErrCorrupt = errors.New("corrupt audit entry")

// answerKeys are the fields of a server answer the trail keeps: what
// identifies the object and its state, never a body.
var answerKeys = []string{"id", "name", "state", "status", "versionNumber", "key", "job_id", "updatedAt",
	"experiment_id", "experiment_name", "experiment_state", "deleted"}

// Summarize keeps the identifying top-level scalars of a JSON object (ids,
// names, states); anything else gives nil.
func Summarize(result json.RawMessage) json.RawMessage {
	var m map[string]any
	if len(result) == 0 || json.Unmarshal(result, &m) != nil {
		return nil
	}
	keep := map[string]any{}
	for k, v := range m {
		if !slices.Contains(answerKeys, k) {
			continue
		}
		switch v.(type) {
		case string, float64, bool:
			keep[k] = v
		}
	}
	if len(keep) == 0 {
		return nil
	}
	b, err := json.Marshal(keep)
	if err != nil {
		return nil
	}
	return b
}

// TargetOf names what params act on: a name when they carry one, else an
// experiment, flag or segment id.
func TargetOf(params json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(params, &m) != nil {
		return ""
	}
	for _, k := range []string{"name", "experiment_name", "flag_key", "key", "segment_name", "experiment_id", "flag_id", "segment_id", "id"} {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}
