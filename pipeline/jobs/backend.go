package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/upgrade-agent/upgrade-agent/internal/lazy"
)

// RecordBackend keeps job records somewhere other than the jobs folder: the
// team's PostgreSQL store (docs/teams.md). It deals in the records' JSON
// bytes, so it needs nothing of this package. Worker logs stay in the local
// jobs folder either way.
type RecordBackend interface {
	// Get returns the record's bytes; fs.ErrNotExist when there is none.
	Get(id string) ([]byte, error)
	// Create stores data unless a record with id exists, which it returns.
	Create(id string, data []byte) (existing []byte, created bool, err error)
	// Update calls fn with the current bytes under a lock that orders every
	// change to the record, and stores what fn returns (nil: no change).
	Update(id string, fn func(cur []byte) ([]byte, error)) error
	// List returns every record's bytes by id.
	List() (map[string][]byte, error)
	// Where names the record, for messages.
	Where(id string) string
}

func (s *Store) loadBackend(id string) (*Record, error) {
	data, err := s.Backend.Get(id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return decodeRecord(s.Backend.Where(id), id, data)
}

func (s *Store) createBackend(r *Record) (*Record, bool, error) {
	now := s.now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	r.UpdatedAt = now
	data, err := json.Marshal(r)
	if err != nil {
		return nil, false, fmt.Errorf("job %s: encode: %w", r.ID, err)
	}
	old, created, err := s.Backend.Create(r.ID, data)
	if err != nil {
		return nil, false, fmt.Errorf("job %s: %w", r.ID, err)
	}
	if created {
		return r, true, nil
	}
	rec, err := decodeRecord(s.Backend.Where(r.ID), r.ID, old)
	return rec, false, err
}

func (s *Store) updateBackend(id string, fn func(r *Record) error) (*Record, error) {
	var out *Record
	var fnErr error
	err := s.Backend.Update(id, func(cur []byte) ([]byte, error) {
		if cur == nil {
			return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		r, err := decodeRecord(s.Backend.Where(id), id, cur)
		if err != nil {
			return nil, err
		}
		out = r
		if err := fn(r); err != nil {
			if !errors.Is(err, errNoChange) {
				fnErr = err
			}
			return nil, nil
		}
		r.UpdatedAt = s.now()
		return json.Marshal(r)
	})
	if err != nil {
		return nil, err
	}
	return out, fnErr
}

func (s *Store) listBackend() ([]*Record, error) {
	all, err := s.Backend.List()
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var out []*Record
	var errs []error
	for id, data := range all {
		r, err := decodeRecord(s.Backend.Where(id), id, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	sortNewestFirst(out)
	return out, errors.Join(errs...)
}

// hostname is this machine's name, recorded with a worker's pid: a pid
// means something only on the machine it was taken on.
var hostname = &lazy.Value[string]{New: thisHostname}

func thisHostname() string {
	h, _ := os.Hostname()
	return h
}

// onThisHost reports whether the record's pid belongs to this machine.
func onThisHost(r *Record) bool { return r.Host == "" || r.Host == hostname.Get() }

// sortNewestFirst orders records most recently created first, then by id.
func sortNewestFirst(out []*Record) {
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
}
