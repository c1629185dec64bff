package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/upgrade-agent/upgrade-agent/internal/atomicfile"
	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// Record is a job as stored in <state-dir>/jobs/<id>.json.
type Record struct {
	ID        string           `json:"id"`
	SessionID string           `json:"session_id"`
	Action    string           `json:"action"`
	Params    json.RawMessage  `json:"params"`
	State     actions.JobState `json:"state"`
	Progress  actions.Progress `json:"progress"`
	// HeartbeatAt is refreshed about every second by a live worker; a
	// running job whose heartbeat is older than Runner.StaleAfter is
	// presumed dead and restarted.
	HeartbeatAt *time.Time `json:"heartbeat_at,omitempty"`
	PID         int        `json:"pid,omitempty"`
	// Host is the machine PID runs on (teams: backend.go).
	Host string `json:"host,omitempty"`
	// Worker is the claim token of the worker that owns the job; only it
	// may commit. Empty while no worker has claimed the job.
	Worker    string          `json:"worker,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
	// Tally is the job's committed tally, in the action's own shape: a
	// restarted worker continues from it.
	Tally json.RawMessage `json:"tally,omitempty"`
	// Attempts counts the workers launched for this job; Stalls the
	// restarts in a row that found no progress since the previous launch
	// (a worker that dies at once every time must not be relaunched
	// forever); LaunchDone is Progress.Done at the latest launch.
	Attempts   int `json:"attempts"`
	Stalls     int `json:"stalls,omitempty"`
	LaunchDone int `json:"launch_done,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Terminal reports whether the job has ended.
func (r *Record) Terminal() bool { return r.State.Terminal() }

// Status is the record as the pipeline sees it. A queued job is reported
// as running: for the session the job has started either way, and the JSON
// output of ask and resume knows no queued state.
func (r *Record) Status() actions.JobStatus {
	state := r.State
	if state == actions.JobQueued {
		state = actions.JobRunning
	}
	return actions.JobStatus{ID: r.ID, Action: r.Action, State: state, Done: r.Progress.Done, Total: r.Progress.Total,
		Result: r.Result, Error: r.Error, ErrorType: r.ErrorType}
}

// lastSign is the latest moment the job showed life.
func (r *Record) lastSign() time.Time {
	t := r.UpdatedAt
	if r.HeartbeatAt != nil && r.HeartbeatAt.After(t) {
		t = *r.HeartbeatAt
	}
	return t
}

// Errors callers branch on.
var (
	// ErrNotFound: no job has that id.
	ErrNotFound = errors.New("no such job")
	// ErrCorrupt: a record exists but cannot be read as one.
	ErrCorrupt = errors.New("corrupt job record")
	// ErrInvalidID: the id cannot name a job (it would not be a plain file
	// name in the jobs folder).
	ErrInvalidID = errors.New("invalid job id")
)

// errNoChange, returned by an Update function, leaves the record as it is
// without an error for the caller.
var errNoChange = errors.New("no change")

var idRE = lazyre.Of(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidID reports whether id can name a job.
func ValidID(id string) bool { return idRE.Get().MatchString(id) }

func checkID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w %q: use letters, digits, - and _ (at most 64)", ErrInvalidID, id)
	}
	return nil
}

const (
	dirPerm  = 0o700
	filePerm = 0o600
	// maxRecordSize bounds what Load reads: a record holds one result and
	// a tally, a few kilobytes.
	maxRecordSize = 16 << 20
)

// Store keeps job records in one folder.
type Store struct {
	// Now stamps created_at and updated_at; nil means time.Now.
	Now func() time.Time
	// Backend, when set, keeps the records instead of the folder (teams:
	// backend.go).
	Backend RecordBackend

	dir string
}

// OpenStore opens (creating it if needed) the store in <stateDir>/jobs,
// made 0700 also when it existed with wider permissions.
func OpenStore(stateDir string) (*Store, error) {
	if stateDir == "" {
		return nil, errors.New("open job store: empty state dir")
	}
	dir := filepath.Join(stateDir, "jobs")
	for _, d := range []string{stateDir, dir} {
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return nil, fmt.Errorf("open job store: %w", err)
		}
		if err := os.Chmod(d, dirPerm); err != nil {
			return nil, fmt.Errorf("open job store: %w", err)
		}
	}
	return &Store{dir: dir}, nil
}

// Dir is the jobs folder.
func (s *Store) Dir() string { return s.dir }

// Path is the record file of job id.
func (s *Store) Path(id string) string { return filepath.Join(s.dir, id+".json") }

// LogPath is where the worker of job id writes its stderr.
func (s *Store) LogPath(id string) string { return filepath.Join(s.dir, id+".log") }

func (s *Store) lockPath(id string) string { return filepath.Join(s.dir, id+".lock") }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Load reads job id. Unknown id: ErrNotFound; unreadable record:
// ErrCorrupt with the file named.
func (s *Store) Load(id string) (*Record, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return s.load(id)
}

func (s *Store) load(id string) (*Record, error) {
	if s.Backend != nil {
		return s.loadBackend(id)
	}
	path := s.Path(id)
	// A regular file of at most maxRecordSize: a FIFO or a folder planted
	// under a job's name is refused at once instead of blocking the reader.
	data, err := safefile.ReadFile(path, maxRecordSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	case errors.Is(err, safefile.ErrTooLarge), errors.Is(err, safefile.ErrNotRegular):
		return nil, fmt.Errorf("job record %s: %w: %w", path, ErrCorrupt, errors.Unwrap(err))
	case err != nil:
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return decodeRecord(path, id, data)
}

// decodeRecord parses a record strictly; errors name the file and, for
// syntax errors, the line.
func decodeRecord(path, id string, data []byte) (*Record, error) {
	corrupt := func(err error) error { return fmt.Errorf("job record %s: %w: %w", path, ErrCorrupt, err) }
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return nil, corrupt(fmt.Errorf("line %d: %w", line, err))
		}
		return nil, corrupt(err)
	}
	if dec.More() {
		return nil, corrupt(errors.New("data after the JSON object"))
	}
	switch {
	case r.ID != id:
		return nil, corrupt(fmt.Errorf("field id: %q does not match the file name", r.ID))
	case r.Action == "":
		return nil, corrupt(errors.New("field action: empty"))
	}
	if !r.State.Valid() {
		return nil, corrupt(fmt.Errorf("field state: unknown state %q", r.State))
	}
	if r.Progress.Done < 0 || r.Progress.Total < 0 || (r.Progress.Total > 0 && r.Progress.Done > r.Progress.Total) {
		return nil, corrupt(fmt.Errorf("field progress: %d of %d", r.Progress.Done, r.Progress.Total))
	}
	return &r, nil
}

// lock takes the job's file lock, which orders every change to the record
// between processes and between goroutines (each call opens its own
// descriptor, and flock locks of different descriptors exclude each other).
func (s *Store) lock(id string) (func(), error) {
	l := flock.New(s.lockPath(id), flock.SetPermissions(filePerm))
	if err := l.Lock(); err != nil {
		return nil, fmt.Errorf("job %s: lock: %w", id, err)
	}
	return func() { _ = l.Unlock() }, nil
}

// Create writes r as a new record. When a record with that id exists it is
// left alone and returned with created false.
func (s *Store) Create(r *Record) (existing *Record, created bool, err error) {
	if err := checkID(r.ID); err != nil {
		return nil, false, err
	}
	if s.Backend != nil {
		return s.createBackend(r)
	}
	unlock, err := s.lock(r.ID)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	old, err := s.load(r.ID)
	if err == nil {
		return old, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	now := s.now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	r.UpdatedAt = now
	if err := s.write(r); err != nil {
		return nil, false, err
	}
	return r, true, nil
}

// Update changes job id under its lock: fn gets the current record and
// changes it in place; its error aborts the change and is returned
// (errNoChange aborts it silently). The record as stored afterwards is
// returned.
func (s *Store) Update(id string, fn func(r *Record) error) (*Record, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if s.Backend != nil {
		return s.updateBackend(id, fn)
	}
	unlock, err := s.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := s.load(id)
	if err != nil {
		return nil, err
	}
	if err := fn(r); err != nil {
		if errors.Is(err, errNoChange) {
			return r, nil
		}
		return r, err
	}
	r.UpdatedAt = s.now()
	if err := s.write(r); err != nil {
		return nil, err
	}
	return r, nil
}

// MarkFailed records that job id failed with err, unless it has already
// ended: for a worker that cannot even begin (its UpGrade settings do not
// work), where a restart would fail the same way.
func (s *Store) MarkFailed(id string, err error) (*Record, error) {
	return s.Update(id, func(r *Record) error {
		if r.Terminal() {
			return errNoChange
		}
		r.State, r.Error, r.ErrorType = actions.JobFailed, err.Error(), errorType(err)
		return nil
	})
}

// List returns every job, most recently created first. A record that
// cannot be read is skipped and reported in the joined error, so that one
// bad file does not hide the others.
func (s *Store) List() ([]*Record, error) {
	if s.Backend != nil {
		return s.listBackend()
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var out []*Record
	var errs []error
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || e.IsDir() || !ValidID(id) {
			continue
		}
		r, err := s.load(id)
		if err != nil {
			if !errors.Is(err, ErrNotFound) { // removed meanwhile
				errs = append(errs, err)
			}
			continue
		}
		out = append(out, r)
	}
	sortNewestFirst(out)
	return out, errors.Join(errs...)
}

// write replaces the record file atomically: a crash leaves the old or the
// new record, never a torn one. It is only called under the job's lock.
func (s *Store) write(r *Record) (err error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("job %s: encode: %w", r.ID, err)
	}
	data = append(data, '\n')
	path := s.Path(r.ID)
	s.removeStrays(path)
	if err := atomicfile.WriteFile(path, data, filePerm); err != nil {
		return fmt.Errorf("job record %s: %w", path, err)
	}
	return nil
}

// removeStrays deletes the temp files a writer killed in the middle of an
// atomic write of path left behind. Every write of a record happens under
// its lock, which the caller holds: any temp file of the record seen now
// belongs to a writer that is gone.
func (s *Store) removeStrays(path string) {
	strays, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
	for _, f := range strays {
		_ = os.Remove(f)
	}
}
