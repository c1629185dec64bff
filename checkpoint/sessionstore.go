package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// SessionStore is everything a session is, wherever it is kept: the file store
// (FileStore) and the shared PostgreSQL store (store/pgstore) both implement it,
// and one conformance suite (checkpoint/storetest) holds both to the same
// guarantees (docs/teams.md).
type SessionStore interface {
	Store
	// Lock takes the session's exclusive hold without waiting (ErrLocked at
	// once); the hold dies with the process that took it.
	Lock(id string) (unlock func(), err error)
	List() ([]Summary, error)
	Latest(statuses ...Status) (string, error)
	Remove(id string) error
	// Import takes in a checkpoint file (ErrExists for other content under its id).
	Import(path string) (string, error)
	// Export returns the session's latest checkpoint as the bytes of a
	// checkpoint file, verified.
	Export(id string) ([]byte, error)
	History(id string) ([]int, error)
	LoadHistory(id string, seq int) (*Checkpoint, error)
	// Where names the place the session is kept, for messages and `sessions show`.
	Where(id string) string
	// SetServer names the UpGrade this process works against: Save records
	// it as upgrade_server in a checkpoint that names no server yet ("" =
	// record nothing). Call it before the saves it is for.
	SetServer(server string)
}

var _ SessionStore = (*FileStore)(nil)

// SetServer sets s.Server.
func (s *FileStore) SetServer(server string) { s.Server = server }

// Where is the session's checkpoint.json.
func (s *FileStore) Where(id string) string { return s.Path(id) }

// Export reads and verifies the session's checkpoint file and returns its bytes.
func (s *FileStore) Export(id string) ([]byte, error) {
	if !ValidID(id) {
		return nil, notFound(id)
	}
	data, _, err := readFile(s.Path(id))
	if err != nil {
		if isNotExist(err) {
			return nil, notFound(id)
		}
		return nil, err
	}
	if _, _, err := decode(s.Path(id), data, id); err != nil {
		return nil, err
	}
	return data, nil
}

// Decode verifies the bytes of a checkpoint (checksum, format, invariants) as
// Load does; name is only used in errors, wantID (when not empty) is the id
// the checkpoint must carry. migrated: an older format converted in memory.
func Decode(name string, data []byte, wantID string) (cp *Checkpoint, migrated bool, err error) {
	return decode(name, data, wantID)
}

// Encode returns the bytes of cp as a checkpoint file and their checksum.
func Encode(cp *Checkpoint) ([]byte, string, error) { return encode(cp) }

// ReadFile reads a checkpoint file with the store's safety rules (a regular
// file of bounded size).
func ReadFile(path string) ([]byte, error) {
	data, _, err := readFile(path)
	return data, err
}

// ChecksumOf is the checksum stored at the end of checkpoint bytes.
func ChecksumOf(data []byte) string { return checksumOf(data) }

// NextOf prepares the checkpoint Save writes after cp, as FileStore.Save
// does: seq + 1, parent_seq, times, compacted effects, server (recorded as
// upgrade_server when cp names none yet; "" records nothing), validated.
// Other stores use it so that every store writes the same JSON.
func NextOf(cp *Checkpoint, now time.Time, server string) (*Checkpoint, error) {
	if cp == nil {
		return nil, fmt.Errorf("save checkpoint: nil checkpoint")
	}
	id := cp.SessionID
	if !ValidID(id) {
		return nil, fmt.Errorf("save checkpoint: session_id: invalid %q", id)
	}
	switch {
	case cp.Seq < 0:
		return nil, fmt.Errorf("save checkpoint of session %s: seq: negative (%d)", id, cp.Seq)
	case cp.Seq >= MaxSeq:
		return nil, &CorruptError{Path: id, Reason: fmt.Sprintf("seq %d is the largest a checkpoint may have: no save can follow it", cp.Seq)}
	}
	now = now.UTC()
	next := *cp
	next.FormatVersion = FormatVersion
	next.ParentSeq = cp.Seq
	next.Seq = cp.Seq + 1
	next.Effects, next.EffectsDropped = compactEffects(cp.Effects, cp.EffectsDropped, FinishedEffectsKept)
	if next.CreatedAt.IsZero() {
		next.CreatedAt = now
	}
	next.UpdatedAt = now
	if next.UpgradeServer == "" {
		next.UpgradeServer = server
	}
	if err := next.Validate(); err != nil {
		return nil, fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	return &next, nil
}

// CheckSecrets refuses data that contains one of secrets (ErrSecret), as
// FileStore.Save does; values shorter than 8 bytes are ignored.
func CheckSecrets(data []byte, secrets []string) error {
	for i, sec := range secrets {
		if len(sec) < 8 {
			continue
		}
		found := bytes.Contains(data, []byte(sec))
		if !found {
			if q, err := json.Marshal(sec); err == nil {
				found = bytes.Contains(data, q[1:len(q)-1])
			}
		}
		if found {
			return fmt.Errorf("%w (configured secret #%d); nothing was written", ErrSecret, i+1)
		}
	}
	return nil
}

// SummaryOf is the listing entry of a checkpoint.
func SummaryOf(cp *Checkpoint) Summary { return summaryOf(cp) }

// NotFound is ErrNotFound naming the session.
func NotFound(id string) error { return notFound(id) }

// Locked is ErrLocked naming the session.
func Locked(id string) error { return locked(id) }

// Exists is ErrExists with a message.
func Exists(id, msg string) error { return &sessionError{id: id, err: ErrExists, msg: msg} }

// NoneLatest is the ErrNotFound of Latest when no session qualifies.
func NoneLatest(statuses ...Status) error {
	msg := "no stored session"
	if len(statuses) > 0 {
		msg += " is "
		for i, st := range statuses {
			if i > 0 {
				msg += " or "
			}
			msg += string(st)
		}
	}
	return &sessionError{err: ErrNotFound, msg: msg}
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
