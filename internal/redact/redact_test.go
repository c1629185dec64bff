package redact

import (
	"errors"
	"log/slog"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"configured secret", "key=hunter2-secret here", []string{"hunter2-secret"}, "key=[REDACTED] here"},
		{"every occurrence", "ab12ab12 and ab12ab12", []string{"ab12ab12"}, "[REDACTED] and [REDACTED]"},
		{"short secret left alone", "a bc abc", []string{"", "a", "abc"}, "a bc abc"},
		{"secret inside a longer one", "token=abcd-efgh-ijkl", []string{"efgh", "abcd-efgh-ijkl"}, "token=[REDACTED]"},
		{"openai key shape", "use sk-proj_ABCDEFGHIJKLMNOP1234 now", nil, "use [REDACTED] now"},
		{"bearer token", "Authorization: Bearer abcdefghijklmnop.qrs", nil, "Authorization: [REDACTED]"},
		{"short sk- word kept", "ask sk-learn", nil, "ask sk-learn"},
		{"plain text kept", "create Math Hints 50/50", []string{"secret-value"}, "create Math Hints 50/50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in, tt.secrets...); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestZeroRedactorHidesTokenShapes(t *testing.T) {
	var r Redactor
	if got := r.String("sk-ABCDEFGHIJKLMNOPQRST"); got != Mark {
		t.Errorf("zero Redactor left %q", got)
	}
	if got := string(r.Bytes([]byte("x"))); got != "x" {
		t.Errorf("Bytes changed plain text: %q", got)
	}
}

func TestAttr(t *testing.T) {
	r := New("s3cret-value")
	for _, tt := range []struct {
		in   slog.Attr
		want string
	}{
		{slog.String("authorization", "Basic abc"), Mark},
		{slog.String("upgrade.token", "anything"), Mark},
		{slog.String("api-key", "k"), Mark},
		{slog.String("authorization", "none"), "none"},
		{slog.String("authorization", "bearer [redacted]"), "bearer [redacted]"},
		{slog.String("cause", "sent s3cret-value twice"), "sent " + Mark + " twice"},
		{slog.Any("err", errors.New("key s3cret-value")), "key " + Mark},
		{slog.String(slog.MessageKey, "token"), "token"},
		{slog.Int("token", 5), Mark},
		{slog.Int("count", 5), "5"},
	} {
		if got := r.Attr(nil, tt.in).Value.String(); got != tt.want {
			t.Errorf("Attr(%s=%v) = %q, want %q", tt.in.Key, tt.in.Value, got, tt.want)
		}
	}
}
