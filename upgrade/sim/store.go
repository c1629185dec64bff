package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/upgrade-agent/upgrade-agent/internal/atomicfile"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// stateFormat is the version of the data file layout.
const stateFormat = 1

// state is everything the simulator remembers; it is also the data file.
type state struct {
	Format int `json:"format"`
	// ID names this simulator's state, so that a checkpoint can tell the
	// simulator it was proposed against from another one (Identity). It is
	// made on the first request for it; older files have none until then.
	ID string `json:"id,omitempty"`
	// Generation counts the writes of the file, so a reader can tell two
	// versions apart even when size and time coincide.
	Generation int64  `json:"generation"`
	RNG        []byte `json:"rng"`
	IDRNG      []byte `json:"idRng"`
	// Seed keys the draws (condition, pool, mark target), which are fixed
	// functions of seed and ids: the file's seed wins over the options',
	// so every process sharing the file draws alike.
	Seed int64 `json:"seed,omitempty"`

	Experiments []*upgrade.Experiment `json:"experiments"`
	Users       map[string]*user      `json:"users"`
	// Runtime holds, per experiment id, assignments, exclusions and
	// enrollments.
	Runtime map[string]*runtime `json:"runtime"`
	// Picks is read from files of earlier simulators and dropped: which of
	// several experiments sharing a decision point a user gets now follows
	// from the user's enrollments and id, as on the server.
	Picks map[string]map[string]string `json:"picks,omitempty"`
	// Marks holds the last mark per user, site and target.
	Marks map[string]*mark `json:"marks"`
	// Lists holds, per experiment id, its inclusion and exclusion lists
	// once the list routes changed them (lists.go).
	Lists map[string][]*listRow `json:"lists,omitempty"`
	// Catalog holds flags, segments, exposures and the audit log
	// (catalog.go).
	Catalog *catalog `json:"catalog,omitempty"`
	// Metrics are the global metric leaves (metrics.go), Logs the values
	// clients logged for them (logs.go), LogSeq the last log row id.
	Metrics []*metricRow `json:"metrics,omitempty"`
	Logs    []*logRow    `json:"logs,omitempty"`
	LogSeq  int          `json:"logSeq,omitempty"`
	// Strata are the stratification factors (stratification.go).
	Strata []*stratFactor `json:"strata,omitempty"`
}

type user struct {
	Group        map[string][]string `json:"group,omitempty"`
	WorkingGroup map[string]string   `json:"workingGroup,omitempty"`
}

type runtime struct {
	// Users is read from files of earlier simulators, which stored draws at
	// assign, and dropped: only marks store a condition.
	Users          map[string]string      `json:"users,omitempty"`
	Groups         map[string]string      `json:"groups,omitempty"`         // group enrollment: working group id -> condition id
	ExcludedUsers  map[string]string      `json:"excludedUsers,omitempty"`  // user -> reason
	ExcludedGroups map[string]string      `json:"excludedGroups,omitempty"` // group id -> reason
	Enrolled       map[string]*enrollment `json:"enrolled,omitempty"`       // user -> enrollment
	// WSMarks are a within-subjects experiment's marks, per user.
	WSMarks map[string][]wsMark `json:"wsMarks,omitempty"`
	// Snapshot is each query's analysis made when the experiment was
	// first archived (query id -> the analysis element).
	Snapshot map[string]obj `json:"snapshot,omitempty"`
}

type enrollment struct {
	// At is when the mark enrolled the user (server time), for the
	// enrollment-by-date route.
	At          string   `json:"at,omitempty"`
	ConditionID string   `json:"conditionId"`
	GroupID     string   `json:"groupId,omitempty"`
	Partitions  []string `json:"partitions"` // decision point ids marked with that condition
}

type mark struct {
	ID           string `json:"id"`
	UserID       string `json:"userId"`
	Site         string `json:"site"`
	Target       string `json:"target,omitempty"`
	ExperimentID string `json:"experimentId,omitempty"`
	Condition    string `json:"condition,omitempty"`
	Status       string `json:"status,omitempty"`
}

// resetLocked starts from an empty state seeded from the options.
func (s *Sim) resetLocked() {
	s.seed = s.optSeed
	s.st = &state{
		Format:  stateFormat,
		Seed:    s.seed,
		Users:   map[string]*user{},
		Runtime: map[string]*runtime{},
		Marks:   map[string]*mark{},
	}
	s.idx = map[string]*upgrade.Experiment{}
	seed := uint64(s.seed)
	s.pcg = rand.NewPCG(seed, 0x9e3779b97f4a7c15)
	s.idPCG = rand.NewPCG(seed, 0xd1b54a32d192ed03)
	s.idRng = rand.New(s.idPCG)
}

func (s *Sim) runtimeOf(id string) *runtime {
	rt := s.st.Runtime[id]
	if rt == nil {
		rt = &runtime{}
		s.st.Runtime[id] = rt
	}
	return rt
}

// newID makes a version 4 UUID from the seeded id stream.
func (s *Sim) newID() string {
	var b [16]byte
	lo, hi := s.idRng.Uint64(), s.idRng.Uint64()
	for i := 0; i < 8; i++ {
		b[i] = byte(lo >> (8 * i))
		b[8+i] = byte(hi >> (8 * i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// refreshLocked reloads the data file when another process (or another Sim
// on the same file) replaced it since this one last read or wrote it.
func (s *Sim) refreshLocked() error {
	f, err := os.Open(s.file)
	if errors.Is(err, fs.ErrNotExist) {
		if s.seen != nil || s.stale {
			// The file was removed, or never written because the write
			// failed: start over like a fresh server.
			s.resetLocked()
			s.seen, s.stale = nil, false
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("simulator data file %s: %w", s.file, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("simulator data file %s: %w", s.file, err)
	}
	if !s.stale && s.seen != nil && sameVersion(s.seen, fi) {
		return nil
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("simulator data file %s: %w", s.file, err)
	}
	if err := s.installLocked(b); err != nil {
		return err
	}
	s.seen, s.stale = fi, false
	return nil
}

// sameVersion tells whether two stats describe the same version of the file.
// Every write replaces the file by rename, so a new version is a new inode.
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// installLocked decodes a data file strictly and makes it the state.
func (s *Sim) installLocked(b []byte) error {
	wrap := func(err error) error { return fmt.Errorf("simulator data file %s: %w", s.file, err) }
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var st state
	if err := dec.Decode(&st); err != nil {
		return wrap(jsonError(b, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return wrap(fmt.Errorf("unexpected data after the JSON object"))
	}
	if st.Format != stateFormat {
		return wrap(fmt.Errorf("format %d is not supported (want %d)", st.Format, stateFormat))
	}
	pcg, idPCG := rand.NewPCG(0, 0), rand.NewPCG(0, 0)
	if err := pcg.UnmarshalBinary(st.RNG); err != nil {
		return wrap(fmt.Errorf("field rng: %w", err))
	}
	if err := idPCG.UnmarshalBinary(st.IDRNG); err != nil {
		return wrap(fmt.Errorf("field idRng: %w", err))
	}
	idx := make(map[string]*upgrade.Experiment, len(st.Experiments))
	for i, e := range st.Experiments {
		if e == nil || e.ID == "" {
			return wrap(fmt.Errorf("experiments[%d]: no id", i))
		}
		if idx[e.ID] != nil {
			return wrap(fmt.Errorf("experiments[%d]: duplicate id %s", i, e.ID))
		}
		normalizeStored(e)
		idx[e.ID] = e
	}
	for id, u := range st.Users {
		if u == nil {
			return wrap(fmt.Errorf("users.%s: null", id))
		}
	}
	for id, m := range st.Marks {
		if m == nil {
			return wrap(fmt.Errorf("marks.%s: null", id))
		}
	}
	if st.Users == nil {
		st.Users = map[string]*user{}
	}
	if st.Runtime == nil {
		st.Runtime = map[string]*runtime{}
	}
	for id, rt := range st.Runtime {
		if rt == nil {
			st.Runtime[id] = &runtime{}
			continue
		}
		rt.Users = nil
	}
	st.Picks = nil
	if st.Marks == nil {
		st.Marks = map[string]*mark{}
	}
	s.st, s.idx = &st, idx
	s.seed = st.Seed
	s.pcg, s.idPCG = pcg, idPCG
	s.idRng = rand.New(idPCG)
	return nil
}

// encodeLocked snapshots the state as the data file's content.
func (s *Sim) encodeLocked() ([]byte, error) {
	var err error
	if s.st.RNG, err = s.pcg.MarshalBinary(); err != nil {
		return nil, err
	}
	if s.st.IDRNG, err = s.idPCG.MarshalBinary(); err != nil {
		return nil, err
	}
	s.st.Generation++
	b, err := json.Marshal(s.st)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// atomicWrite is how the data file is written; tests swap it to inject
// failures.
var atomicWrite = func(path string, data []byte) error { return atomicfile.WriteFile(path, data, 0o600) }

// jsonError adds the line and column to a decoding error.
func jsonError(b []byte, err error) error {
	var (
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
		off int64 = -1
	)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &ute):
		off = ute.Offset
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("unexpected end of JSON: %w", err)
	}
	if off < 0 {
		return err
	}
	line, col := 1, 1
	for i := int64(0); i < off && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
