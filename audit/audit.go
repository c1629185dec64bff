package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
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
	DBUser         string `json:"db_user,omitempty" yaml:"db_user,omitempty"`
	SessionID      string `json:"session_id" yaml:"session_id"`
	ConfirmationID string `json:"confirmation_id,omitempty" yaml:"confirmation_id,omitempty"`
	Action         string `json:"action,omitempty" yaml:"action,omitempty"`
	Target         string `json:"target,omitempty" yaml:"target,omitempty"`
	// TargetID is the id of the target when Target is its name (the
	// experiment, flag or segment as it was when the entry was written).
	TargetID    string          `json:"target_id,omitempty" yaml:"target_id,omitempty"`
	ParamsHash  string          `json:"params_hash,omitempty" yaml:"params_hash,omitempty"`
	Destructive bool            `json:"destructive,omitempty" yaml:"destructive,omitempty"`
	Outcome     string          `json:"outcome,omitempty" yaml:"outcome,omitempty"`
	JobID       string          `json:"job_id,omitempty" yaml:"job_id,omitempty"`
	Answer      json.RawMessage `json:"answer,omitempty" yaml:"-"`
	Message     string          `json:"message,omitempty" yaml:"message,omitempty"`
	// ChangeID names the change an executed write recorded (spec/undo.md);
	// TraceID the OpenTelemetry trace of the turn, when tracing is on.
	ChangeID string `json:"change_id,omitempty" yaml:"change_id,omitempty"`
	TraceID  string `json:"trace_id,omitempty" yaml:"trace_id,omitempty"`
	// N, Prev and Hash chain the trail (Verify): N is the entry's place in
	// it, Prev the hash of the entry before, Hash this entry's own. Filled
	// in by the trail when the entry is stored, never by the caller.
	N    int64  `json:"n,omitempty" yaml:"n,omitempty"`
	Prev string `json:"prev,omitempty" yaml:"prev,omitempty"`
	Hash string `json:"hash,omitempty" yaml:"hash,omitempty"`
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
	// Append stores e at the end of the trail, escaped (Entry.Escaped) and
	// chained; the trail fills in N, Prev and Hash.
	Append(e Entry) error
	// Read returns the matching entries, oldest first.
	Read(f Filter) ([]Entry, error)
	// Verify walks the whole chain and reports the first entry that was
	// changed, removed or put out of order.
	Verify() (Report, error)
}

// Ahead is a trail that can hold an entry back until the next checkpoint
// save of its session stores it (in the same transaction, for PostgreSQL):
// the approved entry of a write is stored before the write starts, and
// when it cannot be, the save fails and nothing runs.
type Ahead interface {
	Stage(e Entry)
	// Flush appends what is still staged (the session was never saved
	// after the decision); called when the process ends.
	Flush() error
}

// Report is what Verify found.
type Report struct {
	// Entries is how many entries the chain holds; Head is the hash of the
	// last one (keep it: an entry removed from the end is only seen against
	// an earlier head).
	Entries int    `json:"entries" yaml:"entries"`
	Head    string `json:"head" yaml:"head"`
	// Legacy counts the entries written before the trail was chained.
	Legacy  int      `json:"legacy,omitempty" yaml:"legacy,omitempty"`
	Problem *Problem `json:"problem,omitempty" yaml:"problem,omitempty"`
}

// Problem is the first break in a chain.
type Problem struct {
	// Where names the entry: file and line, or table and n.
	Where  string `json:"where" yaml:"where"`
	N      int64  `json:"n" yaml:"n"`
	Kind   string `json:"kind" yaml:"kind"` // changed, removed, out_of_order
	Reason string `json:"reason" yaml:"reason"`
}

// Kinds of Problem.
const (
	BreakChanged    = "changed"
	BreakRemoved    = "removed"
	BreakOutOfOrder = "out_of_order"
)

// FileName is the trail of the file store, in the state dir.
const FileName = "audit.jsonl"

// FileLog appends entries to <state-dir>/audit.jsonl, one JSON object a
// line, each write with O_APPEND and fsync under an exclusive lock of
// audit.jsonl.lock (the chain needs the last line): entries of concurrent
// processes never interleave and each names the one before it.
type FileLog struct {
	path string
	now  func() time.Time

	mu     sync.Mutex
	staged []Entry
}

// OpenFileLog returns the trail in stateDir; now stamps entries that carry
// no time (nil: time.Now).
func OpenFileLog(stateDir string, now func() time.Time) *FileLog {
	if now == nil {
		now = time.Now
	}
	return &FileLog{path: filepath.Join(stateDir, FileName), now: now}
}

// Path is the JSONL file.
func (l *FileLog) Path() string { return l.path }

// Append writes e as one chained line.
func (l *FileLog) Append(e Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked([]Entry{e})
}

// Stage holds e until FlushSession (the file store's next save of its
// session) or Flush writes it.
func (l *FileLog) Stage(e Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.staged = append(l.staged, e)
}

// FlushSession appends the entries staged for session id; the checkpoint
// save that follows a decision calls it first, and fails when it fails.
func (l *FileLog) FlushSession(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var mine, rest []Entry
	for _, e := range l.staged {
		if e.SessionID == id {
			mine = append(mine, e)
		} else {
			rest = append(rest, e)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	if err := l.appendLocked(mine); err != nil {
		return err
	}
	l.staged = rest
	return nil
}

// Flush appends every staged entry.
func (l *FileLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.staged) == 0 {
		return nil
	}
	err := l.appendLocked(l.staged)
	l.staged = nil
	return err
}

func (l *FileLog) appendLocked(entries []Entry) error {
	lk := flock.New(l.path + ".lock")
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("audit %s: lock: %w", l.path, err)
	}
	defer func() { _ = lk.Unlock() }()
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	last, err := lastLine(f)
	if err != nil {
		return fmt.Errorf("audit %s: %w", l.path, err)
	}
	n, prev := int64(0), ""
	if len(last) > 0 {
		prev = lineHash(last)
		var head Entry
		if json.Unmarshal(last, &head) == nil {
			n = head.N
		}
	}
	var buf []byte
	for _, e := range entries {
		if e.Time.IsZero() {
			e.Time = l.now()
		}
		n++
		line, err := chainLine(e, n, prev)
		if err != nil {
			return err
		}
		prev = lineHash(line)
		buf = append(append(buf, line...), '\n')
	}
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("audit %s: %w", l.path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("audit %s: %w", l.path, err)
	}
	return nil
}

// chainLine is e as a line of the file trail: escaped, numbered n, naming
// the hash of the line before (prev) and ending in its own hash.
func chainLine(e Entry, n int64, prev string) ([]byte, error) {
	e = e.Escaped()
	e.N, e.Prev, e.Hash = n, prev, ""
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("audit: encode: %w", err)
	}
	sum := sha256.Sum256(body)
	return append(body[:len(body)-1], `,"hash":"`+hex.EncodeToString(sum[:])+`"}`...), nil
}

// lineHash is what the next line names as prev: the hash of a whole line.
func lineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// lastLine reads the file's last non-empty line.
func lastLine(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	for chunk := int64(64 << 10); ; chunk *= 4 {
		off := max(size-chunk, 0)
		buf := make([]byte, size-off)
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		buf = bytes.TrimRight(buf, "\n")
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			return buf[i+1:], nil
		}
		if off == 0 {
			return buf, nil
		}
	}
}

// Read parses the file; a line that is not an entry is an error naming the
// file and line (the trail is never rewritten, so it is reported, not skipped).
func (l *FileLog) Read(flt Filter) ([]Entry, error) {
	var out []Entry
	err := l.scan(func(n int, line []byte, e Entry) error {
		if flt.Match(e) {
			e.Prev, e.Hash = "", ""
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// scan calls fn for each line that is an entry, in file order.
func (l *FileLog) scan(fn func(n int, line []byte, e Entry) error) error {
	data, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%w: %s:%d: %v", ErrCorrupt, l.path, n, err)
		}
		if err := fn(n, line, e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit %s: %w", l.path, err)
	}
	return nil
}

// Verify walks the file: each line's own hash, its number, and the hash of
// the line before it. Lines written before the trail was chained (no hash)
// are counted as legacy; a legacy line after a chained one is a break.
func (l *FileLog) Verify() (Report, error) {
	var r Report
	var prevLine []byte
	var prevN int64
	err := l.scan(func(ln int, line []byte, e Entry) error {
		if r.Problem != nil {
			return nil
		}
		where := fmt.Sprintf("%s:%d", l.path, ln)
		brk := func(kind, format string, args ...any) {
			r.Problem = &Problem{Where: where, N: e.N, Kind: kind, Reason: fmt.Sprintf(format, args...)}
		}
		if e.Hash == "" {
			if prevN > 0 {
				brk(BreakChanged, "line has no hash after chained entries")
				return nil
			}
			r.Legacy++
			prevLine = slices.Clone(line)
			return nil
		}
		body, ok := bytes.CutSuffix(line, []byte(`,"hash":"`+e.Hash+`"}`))
		if !ok {
			brk(BreakChanged, "the hash is not where the trail writes it")
			return nil
		}
		body = append(slices.Clone(body), '}')
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != e.Hash {
			brk(BreakChanged, "entry %d does not match its hash", e.N)
			return nil
		}
		switch {
		case prevN > 0 && e.N <= prevN:
			brk(BreakOutOfOrder, "entry %d follows entry %d", e.N, prevN)
			return nil
		case prevN > 0 && e.N != prevN+1:
			brk(BreakRemoved, "entries %d to %d are missing before entry %d", prevN+1, e.N-1, e.N)
			return nil
		case prevN == 0 && e.N != 1 && r.Legacy == 0:
			brk(BreakRemoved, "the trail starts at entry %d", e.N)
			return nil
		}
		want := ""
		if prevLine != nil {
			want = lineHash(prevLine)
		}
		if e.Prev != want {
			brk(BreakChanged, "entry %d does not name the entry before it (that entry was changed or removed)", e.N)
			return nil
		}
		prevN, prevLine = e.N, slices.Clone(line)
		r.Entries++
		r.Head = e.Hash
		return nil
	})
	return r, err
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
	_, v := TargetField(params)
	return v
}

// TargetField is TargetOf with the param it came from (flag_id, say), so
// that an id can be looked up as what it is.
func TargetField(params json.RawMessage) (field, value string) {
	var m map[string]any
	if json.Unmarshal(params, &m) != nil {
		return "", ""
	}
	for _, k := range []string{"name", "experiment_name", "flag_key", "key", "segment_name", "experiment_id", "flag_id", "segment_id", "id"} {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return k, s
		}
	}
	return "", ""
}
