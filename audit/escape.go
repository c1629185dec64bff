package audit

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape makes text storable in any trail without losing a byte: a NUL
// (which PostgreSQL's jsonb refuses) becomes \x00, each byte that is not
// UTF-8 becomes \xNN, and a backslash becomes \\, so the escaped form reads
// back to exactly one original. Other control characters are kept: JSON
// escapes them, and the views make them visible on a terminal.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == 0:
			b.WriteString(`\x00`)
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsAny(s, "\x00\\")
}

// Escaped is e with every text field escaped (Escape) and the answer's
// strings too: what both trails store.
func (e Entry) Escaped() Entry {
	for _, p := range []*string{&e.Event, &e.Actor, &e.DBUser, &e.SessionID, &e.ConfirmationID, &e.Action,
		&e.Target, &e.TargetID, &e.ParamsHash, &e.Outcome, &e.JobID, &e.Message} {
		*p = Escape(*p)
	}
	e.Answer = escapeJSON(e.Answer)
	return e
}

// escapeJSON escapes the strings of a JSON value (keys included); a value
// that is not JSON is kept as an escaped string, so it is never dropped.
func escapeJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		b, _ := json.Marshal(Escape(string(raw)))
		return b
	}
	b, err := json.Marshal(escapeValue(v))
	if err != nil {
		return nil
	}
	// json.Unmarshal has already turned invalid UTF-8 into U+FFFD; a raw
	// \u0000 in the input is a NUL here and is escaped like any other.
	return b
}

func escapeValue(v any) any {
	switch x := v.(type) {
	case string:
		return Escape(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[Escape(k)] = escapeValue(val)
		}
		return out
	case []any:
		for i := range x {
			x[i] = escapeValue(x[i])
		}
		return x
	}
	return v
}
