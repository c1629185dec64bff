package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// DefaultVersion is the server version the simulator reports unless told
// otherwise.
const DefaultVersion = "6.5.0"

// Options configure a simulator.
type Options struct {
	// Seed fixes the random choices (conditions, shared decision points,
	// generated ids). It only applies to a fresh state: a DataFile carries
	// its own random position.
	Seed int64
	// Metadata is the context metadata served and validated against; nil
	// means upgrade.DefaultContextMetadata().
	Metadata upgrade.ContextMetadata
	// DataFile persists the state as JSON; "" keeps it in memory only.
	DataFile string
	// Version is reported by GET /api; "" = DefaultVersion. A version
	// starting with "6.2" answers with internal state names and the 6.2
	// single-object segment shape.
	Version string
	// Now is the clock for createdAt, updatedAt and state logs; nil = time.Now.
	Now func() time.Time
	// Token, when not empty, is the bearer token the admin routes demand
	// (401 otherwise), so that the client's auth failures can be exercised.
	// Empty imitates a server with login switched off.
	Token string
}

// Sim is one simulated UpGrade server. All methods are safe for concurrent
// use; one mutex guards the whole state.
type Sim struct {
	meta     upgrade.ContextMetadata
	metaResp []byte // the answer of GET /experiments/contextMetaData, encoded once
	version  string
	legacy   bool // answer in the 6.2 shapes
	now      func() time.Time
	token    string
	optSeed  int64 // Options.Seed: the seed of a fresh state
	seed     int64 // the seed in force (a data file keeps its own)

	requests atomic.Int64

	mu    sync.Mutex
	st    *state
	idx   map[string]*upgrade.Experiment
	pcg   *rand.PCG  // an unused stream kept in the data file's "rng" for older readers
	idRng *rand.Rand // generated ids, a separate stream so ids do not shift assignments
	idPCG *rand.PCG

	file  string
	lock  *flock.Flock
	seen  os.FileInfo // the data file as last read or written by this process
	stale bool        // a write failed: memory holds changes the file lacks

	// Group commit. Every change gets a sequence number; one writer at a
	// time (wmu) persists everything changed so far in one fsync'd write,
	// so concurrent requests share writes. The file lock is held from the
	// first unsaved change until the write that holds it is done, so no
	// other process writes in between.
	wmu       sync.Mutex
	dirty     int64       // sequence of the last change in memory
	covered   int64       // changes up to here have been written or lost
	failures  []lostRange // changes lost to failed writes (rare)
	flockHeld bool
}

type lostRange struct {
	from, to int64 // (from, to]
	err      error
}

// New builds a simulator. With a DataFile it loads the file when it exists
// (a damaged file is an error naming it) and creates its directory otherwise.
func New(opts Options) (*Sim, error) {
	meta := opts.Metadata
	if meta == nil {
		meta = upgrade.DefaultContextMetadata()
	}
	meta = copyMetadata(meta)
	if err := checkMetadata(meta); err != nil {
		return nil, fmt.Errorf("simulator metadata: %w", err)
	}
	resp, err := json.Marshal(map[string]upgrade.ContextMetadata{"contextMetadata": meta})
	if err != nil {
		return nil, fmt.Errorf("simulator metadata: %w", err)
	}
	version := strings.TrimSpace(opts.Version)
	if version == "" {
		version = DefaultVersion
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Sim{
		meta:     meta,
		metaResp: resp,
		version:  version,
		legacy:   strings.HasPrefix(version, "6.2"),
		now:      now,
		token:    opts.Token,
		optSeed:  opts.Seed,
	}
	s.resetLocked()
	if opts.DataFile != "" {
		s.file = filepath.Clean(opts.DataFile)
		if err := os.MkdirAll(filepath.Dir(s.file), 0o700); err != nil {
			return nil, fmt.Errorf("simulator data file %s: %w", s.file, err)
		}
		s.lock = flock.New(s.file+".lock", flock.SetPermissions(0o600))
		if err := s.refreshLocked(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Requests counts the HTTP requests served so far (any route, any status).
func (s *Sim) Requests() int64 { return s.requests.Load() }

// Experiments returns a copy of every experiment in creation order, with
// internal state names.
func (s *Sim) Experiments() []upgrade.Experiment {
	var out []upgrade.Experiment
	_ = s.view(func() {
		out = make([]upgrade.Experiment, 0, len(s.st.Experiments))
		for _, e := range s.st.Experiments {
			out = append(out, cloneExperiment(e))
		}
	})
	return out
}

// Experiment returns a copy of one experiment.
func (s *Sim) Experiment(id string) (upgrade.Experiment, bool) {
	var (
		out upgrade.Experiment
		ok  bool
	)
	_ = s.view(func() {
		if e := s.idx[id]; e != nil {
			out, ok = cloneExperiment(e), true
		}
	})
	return out, ok
}

// User returns what the server knows about an initialised user.
func (s *Sim) User(id string) (upgrade.InitResponse, bool) {
	var (
		out upgrade.InitResponse
		ok  bool
	)
	_ = s.view(func() {
		if u := s.st.Users[id]; u != nil {
			out, ok = userResponse(id, u), true
		}
	})
	return out, ok
}

// Users returns every initialised user, sorted by id.
func (s *Sim) Users() []upgrade.InitResponse {
	var out []upgrade.InitResponse
	_ = s.view(func() {
		for id, u := range s.st.Users {
			out = append(out, userResponse(id, u))
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CreateExperiment creates e exactly as POST /experiments would (same
// validation, fresh condition and decision point ids) and returns the stored
// copy. Scenario setup uses it to arrange a backend without HTTP.
func (s *Sim) CreateExperiment(e upgrade.Experiment) (upgrade.Experiment, error) {
	body, err := e.MarshalFor(upgrade.SegmentsArray)
	if err != nil {
		return upgrade.Experiment{}, fmt.Errorf("create experiment: %w", err)
	}
	var out upgrade.Experiment
	err = s.mutate(func() (bool, *apiError) {
		created, aerr := s.createLocked(body)
		if aerr != nil {
			return false, aerr
		}
		out = cloneExperiment(created)
		return true, nil
	})
	return out, err
}

// SetState changes the state of experiment id as POST /experiments/state
// would.
func (s *Sim) SetState(id string, st upgrade.State) (upgrade.Experiment, error) {
	var out upgrade.Experiment
	err := s.mutate(func() (bool, *apiError) {
		e, aerr := s.setStateLocked(id, upgrade.NormalizeState(string(st)), nil)
		if aerr != nil {
			return false, aerr
		}
		out = cloneExperiment(e)
		return true, nil
	})
	return out, err
}

// InitUser initialises (or updates) a user as POST /v6/init would.
func (s *Sim) InitUser(id string, req upgrade.InitRequest) (upgrade.InitResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return upgrade.InitResponse{}, fmt.Errorf("init user: %w", err)
	}
	var out upgrade.InitResponse
	err = s.mutate(func() (bool, *apiError) {
		resp, changed, aerr := s.initLocked(id, body)
		if aerr != nil {
			return false, aerr
		}
		out = resp
		return changed, nil
	})
	return out, err
}

// EnrollmentStats computes the enrollment of experiment id as
// POST /stats/enrollment/detail would.
func (s *Sim) EnrollmentStats(id string) (upgrade.EnrollmentStats, error) {
	var (
		out  upgrade.EnrollmentStats
		aerr *apiError
	)
	if err := s.view(func() { out, aerr = s.statsLocked(id) }); err != nil {
		return out, err
	}
	if aerr != nil {
		return out, aerr
	}
	return out, nil
}

// view runs fn under the lock on a state that reflects the data file.
func (s *Sim) view(fn func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != "" && !s.flockHeld {
		// While this process holds the file lock nobody else can have
		// written, and memory is ahead of the file: no reload then.
		if err := s.refreshLocked(); err != nil {
			return err
		}
	}
	fn()
	return nil
}

// mutate runs fn under the lock and, with a data file, under the file lock
// on a state reloaded if another process changed the file; it returns once
// the change is on disk. fn must check everything before it changes
// anything, so that an error leaves the state as it was.
func (s *Sim) mutate(fn func() (changed bool, aerr *apiError)) error {
	s.mu.Lock()
	if s.file == "" {
		defer s.mu.Unlock()
		if _, aerr := fn(); aerr != nil {
			return aerr
		}
		return nil
	}
	if !s.flockHeld {
		if err := s.lock.Lock(); err != nil {
			s.mu.Unlock()
			return storageError(fmt.Errorf("simulator data file %s: lock: %w", s.file, err))
		}
		s.flockHeld = true
		if err := s.refreshLocked(); err != nil {
			s.releaseIfCleanLocked()
			s.mu.Unlock()
			return storageError(err)
		}
	}
	changed, aerr, crash := callGuarded(fn)
	if crash != nil {
		// A bug, not bad input: free the locks before the handler's
		// recover turns it into a 500.
		s.releaseIfCleanLocked()
		s.mu.Unlock()
		panic(crash)
	}
	if !changed {
		s.releaseIfCleanLocked()
		s.mu.Unlock()
		if aerr != nil {
			return aerr
		}
		return nil
	}
	// A change that fails half-way (the server made some rows before its
	// error, outside one transaction) is kept, and the error answered.
	s.dirty++
	seq := s.dirty
	s.mu.Unlock()
	if err := s.flush(seq); err != nil {
		return err
	}
	if aerr != nil {
		return aerr
	}
	return nil
}

func callGuarded(fn func() (bool, *apiError)) (changed bool, aerr *apiError, crash any) {
	defer func() { crash = recover() }()
	changed, aerr = fn()
	return changed, aerr, nil
}

// flush returns once change seq is on disk (or lost to a failed write).
func (s *Sim) flush(seq int64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if seq <= s.covered {
		err := s.lostLocked(seq)
		s.mu.Unlock()
		return err
	}
	upto := s.dirty
	b, err := s.encodeLocked()
	s.mu.Unlock()
	var fi os.FileInfo
	if err == nil {
		err = atomicWrite(s.file, b)
	}
	if err == nil {
		fi, err = os.Stat(s.file)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// Everything not yet written is lost, including changes made
		// while this write ran; the next request reloads the file.
		err = fmt.Errorf("simulator data file %s: %w", s.file, err)
		s.failures = append(s.failures, lostRange{from: s.covered, to: s.dirty, err: err})
		if len(s.failures) > 64 {
			s.failures = s.failures[1:]
		}
		s.covered = s.dirty
		s.stale = true
	} else {
		s.covered = upto
		s.seen = fi
	}
	s.releaseIfCleanLocked()
	return s.lostLocked(seq)
}

// lostLocked reports the failure that lost change seq, if any.
func (s *Sim) lostLocked(seq int64) error {
	for _, f := range s.failures {
		if seq > f.from && seq <= f.to {
			return storageError(f.err)
		}
	}
	return nil
}

// releaseIfCleanLocked lets other processes write once nothing of this one
// awaits writing.
func (s *Sim) releaseIfCleanLocked() {
	if s.flockHeld && s.covered == s.dirty {
		_ = s.lock.Unlock()
		s.flockHeld = false
	}
}

func userResponse(id string, u *user) upgrade.InitResponse {
	r := upgrade.InitResponse{ID: id}
	if u.Group != nil {
		r.Group = make(map[string][]string, len(u.Group))
		for k, v := range u.Group {
			r.Group[k] = append([]string{}, v...)
		}
	}
	if u.WorkingGroup != nil {
		r.WorkingGroup = make(map[string]string, len(u.WorkingGroup))
		for k, v := range u.WorkingGroup {
			r.WorkingGroup[k] = v
		}
	}
	return r
}

// cloneExperiment deep-copies through the wire form, which is lossless for
// the normalised model and keeps callers away from the stored pointers.
func cloneExperiment(e *upgrade.Experiment) upgrade.Experiment {
	b, err := e.MarshalFor(upgrade.SegmentsArray)
	if err != nil {
		return *e
	}
	var out upgrade.Experiment
	if err := json.Unmarshal(b, &out); err != nil {
		return *e
	}
	return out
}

func copyMetadata(m upgrade.ContextMetadata) upgrade.ContextMetadata {
	out := make(upgrade.ContextMetadata, len(m))
	for k, v := range m {
		out[k] = upgrade.ContextInfo{
			Conditions: nonNil(v.Conditions),
			GroupTypes: nonNil(v.GroupTypes),
			ExpIDs:     nonNil(v.ExpIDs),
			ExpPoints:  nonNil(v.ExpPoints),
		}
	}
	return out
}

func nonNil(s []string) []string {
	return append([]string{}, s...)
}
