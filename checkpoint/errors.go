package checkpoint

import "errors"

// Sentinels callers branch on with errors.Is (the CLI maps them to exit codes:
// ErrNotFound, ErrCorrupt and ErrExists -> 2, ErrLocked and ErrConflict -> 12).
var (
	// ErrNotFound: no session with this id in the store.
	ErrNotFound = errors.New("unknown session")
	// ErrLocked: another process (or another lock in this one) holds the session.
	ErrLocked = errors.New("session is in use by another process")
	// ErrCorrupt: a checkpoint failed its integrity checks; see *CorruptError.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrConflict: the write would lose a newer checkpoint (the file on disk is not the
	// one the caller started from).
	ErrConflict = errors.New("checkpoint conflict")
	// ErrExists: Import refused a file because the store already holds its session with
	// other content. It is bad input, not a race: the person removes the local session
	// first (upgrade-agent sessions rm ID) if the file is to replace it. It does not
	// match ErrConflict.
	ErrExists = errors.New("session already exists")
	// ErrSecret: Save refused to write because the encoding contains a secret value.
	ErrSecret = errors.New("checkpoint would contain a secret")
)

// CorruptError says which file failed which check. The file is left as it was.
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string {
	return "corrupt checkpoint " + e.Path + ": " + e.Reason
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// sessionError carries the id in the message while matching its sentinel.
type sessionError struct {
	id  string
	err error  // ErrNotFound, ErrLocked or ErrExists
	msg string // replaces the default message when set
}

func (e *sessionError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	if e.err == ErrLocked {
		return "session " + e.id + " is in use by another process"
	}
	return "unknown session " + e.id
}

func (e *sessionError) Unwrap() error { return e.err }

func notFound(id string) error { return &sessionError{id: id, err: ErrNotFound} }
func locked(id string) error   { return &sessionError{id: id, err: ErrLocked} }
