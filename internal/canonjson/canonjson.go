// Package canonjson is the canonical JSON of the project and the hash a
// confirmation is bound to. It sits below both checkpoint (which stores the
// hash) and pipeline/actions (which computes it when params are bound), so
// that neither imports the other for it.
//
// It must not know what the values mean.
package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Canonical re-encodes one JSON value in canonical form: object keys sorted
// by their UTF-8 bytes, no insignificant whitespace, numbers exactly as
// written in the input, strings escaped the way encoding/json escapes them
// with HTML escaping off. Two values that differ only in key order or
// layout have the same canonical form.
func Canonical(raw []byte) ([]byte, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// ParamsHash is the hex SHA-256 of the canonical JSON of {"action": action,
// "params": params}. Empty params count as null. A confirmation is bound to
// this hash: if the action or any of its params changes, the hash changes
// and the old approval is void.
func ParamsHash(action string, params json.RawMessage) (string, error) {
	var p any
	if len(bytes.TrimSpace(params)) > 0 {
		var err error
		if p, err = decode(params); err != nil {
			return "", fmt.Errorf("params of %s: %w", action, err)
		}
	}
	b, err := Marshal(map[string]any{"action": action, "params": p})
	if err != nil {
		return "", fmt.Errorf("params of %s: %w", action, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("invalid JSON: data after the value at offset %d", dec.InputOffset())
	}
	return v, nil
}

// Marshal encodes v compactly, without HTML escaping or a trailing newline
// (map keys sorted, as encoding/json sorts them).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
