package upgrade

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// NewID returns a fresh random UUID (version 4), the id format UpGrade uses
// for experiments, conditions and decision points. The client needs it on
// create (the server insists on ids it then replaces), the simulator to mint
// its own ids, and the pipeline to name new conditions in updates.
func NewID() string {
	var b [16]byte
	// crypto/rand.Read never fails on supported platforms (Go 1.24+ crashes
	// the program instead of returning an error), so the error is moot.
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return formatUUID(b)
}

// IDFrom derives a UUID from a key (SHA-256 based): the same key always
// gives the same id. It names a create that may have to be repeated
// (WithCreateID). The version nibble says 4, like the server's own ids, since
// servers validate ids with version-checking UUID patterns.
func IDFrom(key string) string {
	sum := sha256.Sum256([]byte("upgrade-agent/experiment-id\x00" + key))
	var b [16]byte
	copy(b[:], sum[:16])
	b[6] = b[6]&0x0f | 0x40 // version 4 layout
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}

// IsUUID reports whether s has the textual form of a UUID
// (8-4-4-4-12 hexadecimal digits, either case). UpGrade answers 400 to an
// experiment route whose id is not of this form.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
