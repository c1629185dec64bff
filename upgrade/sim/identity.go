package sim

import (
	"crypto/rand"
	"encoding/hex"
)

// StoredID is the id of the simulator's state, "" when it has none yet. It
// reads the data file if another process changed it, and writes nothing.
func (s *Sim) StoredID() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != "" {
		if err := s.refreshLocked(); err != nil {
			return "", err
		}
	}
	return s.st.ID, nil
}

// Identity is the id of the simulator's state, made (and, with a data file,
// written) when the state has none. Two simulators share an id only when
// they share the state: the same data file, or a copy of it. The id is
// random, not drawn from the seeded streams, so making it shifts no
// generated id or assignment.
func (s *Sim) Identity() (string, error) {
	var id string
	err := s.mutate(func() (bool, *apiError) {
		if s.st.ID != "" {
			id = s.st.ID
			return false, nil
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.st.ID = hex.EncodeToString(b[:])
		id = s.st.ID
		return true, nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// ServerPrefix starts the name a checkpoint records for an embedded
// simulator: ServerPrefix + Identity().
const ServerPrefix = "embedded-simulator:"
