package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
)

// NewSessionID returns 12 random lowercase hex digits (48 bits): short enough to type
// in `resume 3f2a9c...`, and a collision among the sessions of one state dir is
// negligible (about 1 in 10^7 after 5,000 sessions).
func NewSessionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go >= 1.24)
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id can name a session folder: 1 to 64 characters from
// [A-Za-z0-9_-], starting with a letter or digit. This keeps ids from escaping the
// sessions folder ("..", "/") and from being read as flags.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}
