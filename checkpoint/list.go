package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// Summary describes one stored session for `sessions list`.
type Summary struct {
	ID     string `json:"id"`
	Status Status `json:"status"` // StatusCorrupt when the checkpoint cannot be read
	Seq    int    `json:"seq"`
	// Turns is summary.turns when the pipeline set it, else counters.turns.
	Turns       int       `json:"turns"`
	LastMessage string    `json:"last_message,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// UpdatedAt is the file's modification time for a corrupt session.
	UpdatedAt time.Time `json:"updated_at"`
	Usage     Usage     `json:"usage"`
	// Error says why a corrupt session cannot be read, naming the file.
	Error string `json:"error,omitempty"`
}

// List summarises every session that has a checkpoint, most recently updated first.
// A session whose checkpoint fails its checks is listed with Status "corrupt" and the
// reason in Error, so one bad file never hides the others.
func (s *FileStore) List() ([]Summary, error) {
	return s.scan(true)
}

// scan summarises the sessions; with verify false it trusts each file's header
// without hashing the file (Latest verifies the one it picks).
func (s *FileStore) scan(verify bool) ([]Summary, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || !ValidID(id) {
			continue
		}
		path := s.Path(id)
		if !verify {
			// The header is in the first few KB; the bulk need not be read at all.
			if head, err := readPrefix(path, headerPrefix); err == nil {
				if cp, ok := readHeader(head); ok && cp.FormatVersion == FormatVersion && cp.SessionID == id && cp.validateHeader() == nil {
					out = append(out, summaryOf(cp))
					continue
				}
			}
		}
		data, _, err := readFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // locked but never saved, or being created right now
		}
		if err == nil {
			var cp *Checkpoint
			if cp, err = inspect(path, data, id); err == nil {
				out = append(out, summaryOf(cp))
				continue
			}
		}
		sum := Summary{ID: id, Status: StatusCorrupt, Error: err.Error()}
		if st, serr := os.Stat(path); serr == nil {
			sum.UpdatedAt = st.ModTime().UTC()
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(a, b Summary) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Latest returns the id of the most recently updated session whose status is one of
// statuses (any status when none is given). Corrupt sessions never qualify. None:
// ErrNotFound. It runs before every `resume` and `ask --continue`, so it orders the
// sessions by their headers and hashes only the candidates it considers, normally one.
func (s *FileStore) Latest(statuses ...Status) (string, error) {
	list, err := s.scan(false)
	if err != nil {
		return "", err
	}
	for _, sum := range list {
		if sum.Status == StatusCorrupt || len(statuses) > 0 && !slices.Contains(statuses, sum.Status) {
			continue
		}
		path := s.Path(sum.ID)
		data, _, err := readFile(path)
		if err != nil {
			continue // removed meanwhile, or unreadable: not a candidate
		}
		// The header of an intact file says the same, so the choice stands.
		if cp, err := inspect(path, data, sum.ID); err == nil && cp.Status == sum.Status {
			return sum.ID, nil
		}
	}
	return "", NoneLatest(statuses...)
}

// summaryOf builds the listing entry from a checkpoint (possibly only its header).
func summaryOf(cp *Checkpoint) Summary {
	s := Summary{
		ID:        cp.SessionID,
		Status:    cp.Status,
		Seq:       cp.Seq,
		Turns:     cp.Counters.Turns,
		CreatedAt: cp.CreatedAt,
		UpdatedAt: cp.UpdatedAt,
		Usage:     cp.Usage,
	}
	if cp.Summary != nil {
		s.LastMessage = cp.Summary.LastMessage
		if cp.Summary.Turns > 0 {
			s.Turns = cp.Summary.Turns
		}
	}
	return s
}

// inspect verifies a checkpoint file and returns it, possibly without its effects and
// state. For a file of the current format it decodes only the members before effects
// and state, which hold nearly all of the bytes, and checks them; the checksum still
// covers the whole file. So a listing costs a hash, not a decode, per session. What it
// cannot see (an invalid effect under a valid checksum, which only a hand-crafted file
// can have) Load still reports. Anything unusual falls back to the full decode, which
// also produces the precise error.
func inspect(path string, data []byte, id string) (*Checkpoint, error) {
	if verifyChecksum(data) == "" {
		if cp, ok := readHeader(data); ok && cp.FormatVersion == FormatVersion && cp.SessionID == id && cp.validateHeader() == nil {
			return cp, nil
		}
	}
	cp, _, err := decode(path, data, id)
	return cp, err
}

// readHeader decodes members one by one, strictly, until it reaches effects or state.
// ok is false when the file does not look like this package wrote it.
func readHeader(data []byte) (cp *Checkpoint, ok bool) {
	cp = new(Checkpoint)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	// The members always written before effects; the others are omitted when empty.
	required := map[string]bool{"format_version": true, "session_id": true, "seq": true, "parent_seq": true,
		"created_at": true, "updated_at": true, "status": true, "counters": true, "usage": true}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		if key == "effects" || key == "state" {
			return cp, len(required) == 0
		}
		target := fieldTarget(cp, key)
		if target == nil {
			return nil, false
		}
		if err := dec.Decode(target); err != nil {
			return nil, false
		}
		delete(required, key)
	}
	return nil, false
}

// headerPrefix is how much of a file Latest reads to find its header; a header that
// does not fit (a confirmation with very large params) makes it read the whole file.
const headerPrefix = 16 << 10

func readPrefix(path string, n int) ([]byte, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	m, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:m], nil
}
