package upgrade

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// verifyHS256 checks a JWT the way a server would and returns its decoded
// header and payload.
func verifyHS256(t *testing.T, token, secret string) (header, payload any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT %q has %d parts", token, len(parts))
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatalf("signature encoding: %v", err)
	}
	if !hmac.Equal(sig, mac.Sum(nil)) {
		t.Fatal("signature does not verify with the secret")
	}
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return jsonOf(t, string(h)), jsonOf(t, string(p))
}

// TestClientAuthJWT: client routes carry User-Id and a JWT that verifies
// with the secret; admin routes carry the admin token, never the JWT.
func TestClientAuthJWT(t *testing.T) {
	const key, secret = "app-key-1", "s3cret-value"
	f := newFake(t, map[string][]reply{
		"POST /api/v6/init":          {{body: `{"id":"student-1"}`}},
		"POST /api/v6/assign":        {{body: `[]`}},
		"POST /api/v6/mark":          {{body: `{"id":"m"}`}},
		"GET /api/experiments/names": {{body: `[]`}},
	})
	c, _ := newClient(t, f.url(), func(cfg *Config) {
		cfg.ClientAPIKey, cfg.ClientAPISecret, cfg.Token = key, secret, testToken
	})
	ctx := t.Context()
	if _, err := c.Init(ctx, "student-1", InitRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Assign(ctx, "student-1", "assign-prog"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mark(ctx, "student-1", MarkRequest{Data: MarkData{Site: "SelectSection"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExperimentNames(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.requests() {
		auth := r.Headers["Authorization"]
		if !strings.HasPrefix(r.Path, "/api/v6/") {
			if auth != "Bearer "+testToken {
				t.Errorf("%s: Authorization %q, want the admin token", r.Path, auth)
			}
			continue
		}
		if r.Headers["User-Id"] != "student-1" {
			t.Errorf("%s: User-Id %q", r.Path, r.Headers["User-Id"])
		}
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			t.Fatalf("%s: Authorization %q is not a bearer token", r.Path, auth)
		}
		header, payload := verifyHS256(t, token, secret)
		if diff := cmp.Diff(map[string]any{"alg": "HS256", "typ": "JWT"}, header); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"APIKey": key}, payload); diff != "" {
			t.Errorf("payload (-want +got):\n%s", diff)
		}
	}
}

// TestNoCredentialsConfigured: with no token and no client key nothing is
// sent, since a login-disabled server still rejects a bad token.
func TestNoCredentialsConfigured(t *testing.T) {
	f := newFake(t, map[string][]reply{
		"GET /api/experiments/names": {{body: `[]`}},
		"POST /api/v6/assign":        {{body: `[]`}},
	})
	c, _ := newClient(t, f.url(), nil)
	if _, err := c.ExperimentNames(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Assign(t.Context(), "u", "assign-prog"); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.requests() {
		if a, ok := r.Headers["Authorization"]; ok {
			t.Errorf("%s sent Authorization %q", r.Path, a)
		}
	}
}
