package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/internal/canonjson"
)

// CanonicalJSON is canonjson.Canonical: object keys sorted, no
// insignificant whitespace, numbers as written, no HTML escaping.
func CanonicalJSON(raw []byte) ([]byte, error) { return canonjson.Canonical(raw) }

// ParamsHash is canonjson.ParamsHash: the hex SHA-256 of the canonical JSON
// of {"action": action, "params": params}, the hash a confirmation is bound
// to. pipeline/actions computes it there, without importing checkpoint.
func ParamsHash(action string, params json.RawMessage) (string, error) {
	return canonjson.ParamsHash(action, params)
}

// The checksum rule (docs/checkpoints.md): the document is encoded compactly with the
// members in declaration order and "checksum":"" as the last member; the checksum is
// the hex SHA-256 of those bytes, and the file is the same bytes with the 64 hex digits
// written between the last pair of quotes, plus a newline. Encoding once and splicing
// the digest in avoids a second marshal of a large state, and lets Load verify the file
// with one hash over its bytes instead of re-encoding what it decoded.
const (
	checksumKey  = `"checksum":"`
	checksumTail = `"}`
	checksumLen  = sha256.Size * 2
)

// encode returns the file bytes of cp and its checksum. It does not modify cp.
//
// The state is validated by scanJSON and copied once, not run through encoding/json:
// the rest is marshalled with state null, and the state's bytes are put in place of
// that null. The result is byte for byte what json.Encoder (HTML escaping off) would
// write for the whole checkpoint; TestGoldenV1 and TestEncodeMatchesEncodingJSON hold
// it to that.
func encode(cp *Checkpoint) ([]byte, string, error) {
	state := []byte(cp.State)
	if len(state) == 0 {
		state = []byte("null")
	}
	valid, compact := scanJSON(state)
	if !valid {
		var v json.RawMessage
		err := json.Unmarshal(state, &v)
		return nil, "", fmt.Errorf("state: invalid JSON: %v", err)
	}
	if !compact {
		var buf bytes.Buffer
		if err := json.Compact(&buf, state); err != nil {
			return nil, "", fmt.Errorf("state: %w", err)
		}
		state = buf.Bytes()
	}

	c := *cp
	c.Checksum = ""
	c.State = nil
	if c.Effects == nil {
		c.Effects = []Effect{} // "effects": [] rather than null, one spelling on disk
	}
	var buf bytes.Buffer
	buf.Grow(1024 + len(c.MCP) + 256*len(c.Effects))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, "", err
	}
	head := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	const nullTail = `null,` + checksumKey + checksumTail
	if !bytes.HasSuffix(head, []byte(`"state":`+nullTail)) {
		// Only a reordering of the struct fields can cause this.
		return nil, "", errors.New("internal error: state and checksum are not the last members of the encoding")
	}
	head = head[:len(head)-len(nullTail)]

	out := make([]byte, 0, len(head)+len(state)+1+len(checksumKey)+checksumLen+len(checksumTail)+1)
	out = append(out, head...)
	out = append(out, state...)
	out = append(out, ',')
	out = append(out, checksumKey...)
	h := sha256.New()
	h.Write(out)
	h.Write([]byte(checksumTail))
	var sum [checksumLen]byte
	hex.Encode(sum[:], h.Sum(nil))
	out = append(out, sum[:]...)
	out = append(out, checksumTail...)
	out = append(out, '\n')
	return out, string(sum[:]), nil
}

// verifyChecksum checks data against the checksum rule. It returns a reason when the
// file fails, "" when it passes.
func verifyChecksum(data []byte) string {
	body := bytes.TrimRight(data, " \t\r\n")
	n := len(body)
	if n < len(checksumKey)+checksumLen+len(checksumTail) ||
		!bytes.HasSuffix(body, []byte(checksumTail)) {
		return "no checksum as the last member"
	}
	sumStart := n - len(checksumTail) - checksumLen
	keyStart := sumStart - len(checksumKey)
	if string(body[keyStart:sumStart]) != checksumKey {
		return "no checksum as the last member"
	}
	want := body[sumStart : n-len(checksumTail)]
	for _, c := range want {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "checksum is not 64 lowercase hex digits"
		}
	}
	h := sha256.New()
	h.Write(body[:sumStart])
	h.Write([]byte(checksumTail))
	var got [checksumLen]byte
	hex.Encode(got[:], h.Sum(nil))
	if !bytes.Equal(got[:], want) {
		return "checksum mismatch (the file was modified or damaged after it was written)"
	}
	return ""
}

// checksumOf returns the checksum stored at the end of data ("" when there is none).
func checksumOf(data []byte) string {
	body := bytes.TrimRight(data, " \t\r\n")
	n := len(body)
	if n < len(checksumKey)+checksumLen+len(checksumTail) {
		return ""
	}
	return string(body[n-len(checksumTail)-checksumLen : n-len(checksumTail)])
}
