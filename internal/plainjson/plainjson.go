// Package plainjson encodes JSON the way a person or a model reads it: '<',
// '>' and '&' stay as they are (encoding/json escapes them for HTML) and
// there is no trailing newline. The tools' results and the scenario
// transcripts use it, so both show the same text for the same value.
// (checkpoint keeps a copy of its own: it imports nothing of the project,
// which its TestNoProjectImports enforces.)
package plainjson

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
