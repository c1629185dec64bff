package cmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/internal/pgtest"
)

// The first errors of a team set-up: each says what to do and where the
// store URL came from, with the exit code of README's table.
func TestStoreFirstErrors(t *testing.T) {
	c := pgtest.Need(t)
	url, err := c.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	role := "hint_app_" + db
	if err := c.Exec("postgres", fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, c.Password)); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(db, "REVOKE CREATE ON SCHEMA public FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	app := c.URL(db, role, c.Password)
	tests := []struct {
		name  string
		env   []string
		args  []string
		code  int
		wants []string
	}{
		{"app role before the owner made the schema", []string{"UPGRADE_AGENT_STORE=" + app}, []string{"sessions", "list"}, 3,
			[]string{"permission denied", "run any command once as the database owner", "(the URL is from UPGRADE_AGENT_STORE)"}},
		{"a wrong password", nil, []string{"--store", c.URL(db, role, "wrong"), "sessions", "list"}, 3,
			[]string{"password authentication failed", "check the user and password of the store URL (the URL is from --store)"}},
		{"no such database", []string{"UPGRADE_AGENT_STORE=" + c.URL("no_such_db", role, c.Password)}, []string{"sessions", "list"}, 2,
			[]string{"does not exist", "the database named in the store URL does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := agentIn(t, agentEnv(t, append(tt.env, "UPGRADE_AGENT_HOME="+t.TempDir())...), tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.wants {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, c.Password) {
				t.Errorf("the password is printed:\n%s", stderr)
			}
			if n := strings.Count(stderr, "Error:"); n != 1 {
				t.Errorf("%d error lines, want 1:\n%s", n, stderr)
			}
		})
	}
}
