// Package redact is the project's one rule for keeping credentials out of
// text that may be shown, logged or stored: every configured secret and
// every string shaped like an API key or a bearer token becomes Mark.
//
// A log attribute whose name says it holds a credential (authorization,
// token, api_key, secret, password, cookie) is hidden whatever its value,
// unless the value is a placeholder such as "none" or "[redacted]".
//
// The LLM client (errors, cassettes), the UpGrade client (error messages),
// the pipeline (user messages before the model or a checkpoint sees them),
// the logger and the scenario transcripts all apply it, so a credential is
// hidden the same way wherever it turns up.
package redact

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
)

// Mark replaces what is hidden.
const Mark = "[REDACTED]"

// MinLen is the shortest configured secret that is replaced: a one- or
// three-character "key" would shred ordinary text and protects nothing.
const MinLen = 4

// tokenShape matches credentials by their look, configured or not:
// OpenAI-style keys and bearer tokens.
var tokenShape = lazyre.Of(`\b(sk-[A-Za-z0-9_\-]{16,}|Bearer\s+[A-Za-z0-9._\-]{16,})`)

// Redactor hides a fixed set of secrets. The zero value hides only
// token-shaped strings.
type Redactor struct {
	secrets []string // longest first, so a secret inside another is not half-hidden
}

// New returns a Redactor for secrets; empty and short ones are skipped.
func New(secrets ...string) Redactor {
	var keep []string
	for _, s := range secrets {
		if len(s) >= MinLen && !slices.Contains(keep, s) {
			keep = append(keep, s)
		}
	}
	slices.SortFunc(keep, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return Redactor{secrets: keep}
}

// String returns s with every secret and token-shaped string replaced.
func (r Redactor) String(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, Mark)
	}
	return tokenShape.Get().ReplaceAllString(s, Mark)
}

// Bytes is String for a byte slice.
func (r Redactor) Bytes(b []byte) []byte {
	return []byte(r.String(string(b)))
}

// String hides secrets and token-shaped strings in s.
func String(s string, secrets ...string) string {
	return New(secrets...).String(s)
}

// credentialKey matches attribute names whose values are credentials
// whatever they contain.
var credentialKey = lazyre.Of(`(?i)(^|[_.-])(authorization|token|api[_-]?key|secret|password|cookie)$`)

// placeholder tells descriptions such as "none" or "bearer [redacted]",
// which other packages log in place of a credential, from the credential
// itself.
func placeholder(v slog.Value) bool {
	if v.Kind() != slog.KindString {
		return false
	}
	s := strings.ToLower(v.String())
	return s == "" || s == "none" || strings.HasSuffix(s, "redacted") || strings.HasSuffix(s, "redacted]")
}

// Attr hides a log attribute: its whole value when its name is a
// credential's (authorization, upgrade.token, api-key...) and the value is not a placeholder, else
// the secrets and token-shaped strings in its text (the message's too).
// Use it as slog.HandlerOptions.ReplaceAttr.
func (r Redactor) Attr(_ []string, a slog.Attr) slog.Attr {
	if a.Key != slog.MessageKey && credentialKey.Get().MatchString(a.Key) && !placeholder(a.Value) {
		return slog.String(a.Key, Mark)
	}
	var s string
	switch a.Value.Kind() {
	case slog.KindString:
		s = a.Value.String()
	case slog.KindAny:
		s = fmt.Sprint(a.Value.Any())
	default:
		return a
	}
	if hidden := r.String(s); hidden != s {
		return slog.String(a.Key, hidden)
	}
	return a
}
