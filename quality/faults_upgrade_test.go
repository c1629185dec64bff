package quality

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// listScript is an information turn whose one fetch reads the experiments.
const listScript = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: List the experiments., reasoning: Needs the experiment list.}
- call:
    get_all_experiments: {}
- reply: I have what there is.
- reply: Here is what UpGrade said.
`

// turnErrors are the errors of a turn's JSON output.
func turnErrors(t *testing.T, r result) []map[string]string {
	t.Helper()
	var out struct {
		Errors []map[string]string `json:"errors"`
	}
	if err := decodeJSON(r.stdout, &out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r)
	}
	return out.Errors
}

// TestUpgradeFaults: every way UpGrade can fail reaches the person as a
// typed error with the server's own words, a direct command exits with the
// code of cli.md, nothing panics, and the session goes on once the server is
// back.
func TestUpgradeFaults(t *testing.T) {
	t.Parallel()
	const nginx = `<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>`
	tests := []struct {
		name     string
		fault    fault
		listCode int    // exit code of `experiments list`
		errType  string // type of the turn's error
		want     []string
		turnCode int // exit code of the turn
		hint     bool
	}{
		{name: "401", fault: fault{status: 401, contentType: "application/json", body: `{"message":"Unauthorized: token expired"}`},
			listCode: 3, errType: "auth", want: []string{"401 Unauthorized", "token expired"}, turnCode: 3, hint: true},
		{name: "403", fault: fault{status: 403, contentType: "application/json", body: `{"message":"Forbidden for this user"}`},
			listCode: 3, errType: "auth", want: []string{"403 Forbidden", "Forbidden for this user"}, turnCode: 3, hint: true},
		{name: "404", fault: fault{status: 404, contentType: "application/json", body: `{"message":"Experiment not found"}`},
			listCode: 1, errType: "not_found", want: []string{"404 Not Found", "Experiment not found"}},
		{name: "400 with the server's message", fault: fault{status: 400, contentType: "application/json",
			body: `{"message":"Invalid body, check 'errors' property","errors":[{"property":"name","constraints":{"isNotEmpty":"name should not be empty"}}]}`},
			listCode: 1, errType: "validation", want: []string{"400 Bad Request", "Invalid body", "name should not be empty"}},
		{name: "500", fault: fault{status: 500, contentType: "application/json", body: `{"message":"database connection lost"}`},
			listCode: 1, errType: "api", want: []string{"500 Internal Server Error", "database connection lost"}, turnCode: 1},
		// A proxy's HTML page (a plain 500 is not retried; a 502 would be,
		// with waits of seconds).
		{name: "HTML error page", fault: fault{status: 500, contentType: "text/html", body: nginx},
			listCode: 1, errType: "api", want: []string{"HTML error page: 502 Bad Gateway"}, turnCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newFakeUpgrade(t, sim.Options{Seed: 1})
			up.set(tt.fault)
			c := newCLI(t)
			c.env["UPGRADE_API_URL"] = up.URL()

			// A direct command.
			r := c.run("experiments", "list")
			wantCode(t, r, tt.listCode)
			wantContains(t, r, "Error: UpGrade GET "+up.URL()+"/experiments: ")
			wantContains(t, r, tt.want...)
			if r.stdout != "" {
				t.Errorf("a failed listing printed on stdout:\n%s", r)
			}

			// A turn whose fetch fails: a typed error, the turn ends. One
			// rule: a server error fails the turn (exit 1) whatever its
			// body, refused credentials exit 3, what the request got wrong
			// (404, 400) is for the person to fix (exit 0).
			r = c.run("ask", "-o", "json", "--llm", c.script("list.yaml", listScript), "List my experiments")
			wantCode(t, r, tt.turnCode)
			errs := turnErrors(t, r)
			if len(errs) != 1 || errs[0]["type"] != tt.errType {
				t.Fatalf("errors %v, want one of type %s:\n%s", errs, tt.errType, r)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs[0]["message"], w) {
					t.Errorf("error message %q lacks %q", errs[0]["message"], w)
				}
			}
			id := jsonField(t, r, "session_id")

			if tt.hint {
				// In text mode the person is told what to set.
				r = c.run("ask", "--session", id, "--llm", c.script("list.yaml", listScript), "List my experiments")
				wantCode(t, r, 3)
				wantContains(t, r, "UPGRADE_API_TOKEN", "--upgrade-token")
			}

			// The server is back: the same session goes on.
			up.set()
			r = c.run("ask", "--session", id, "-o", "json", "--llm", c.script("list.yaml", listScript), "And now?")
			wantCode(t, r, 0)
			if errs := turnErrors(t, r); len(errs) != 0 {
				t.Errorf("errors after the server came back: %v", errs)
			}
			wantCode(t, c.run("sessions", "show", id), 0)
		})
	}
}

// TestUpgradeUnreachable: a refused connection says "cannot reach UpGrade
// at URL", and the session goes on against a server that answers. The
// client retries a refused GET four times with waits of 0.25 s to 2 s
// (about 4 s in all), so this test takes that long.
func TestUpgradeUnreachable(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(nil)
	deadURL := dead.URL + "/api"
	dead.Close()

	c := newCLI(t)
	c.env["UPGRADE_API_URL"] = deadURL
	r := c.run("ask", "-o", "json", "--llm", c.script("list.yaml", listScript), "List my experiments")
	// The responder explains, and the turn fails: exit 1 (cli.md).
	wantCode(t, r, 1)
	wantContains(t, r, `"status": "failed"`)
	errs := turnErrors(t, r)
	if len(errs) != 1 || errs[0]["type"] != "api" || !strings.Contains(errs[0]["message"], "cannot reach UpGrade at "+deadURL) {
		t.Fatalf("errors %v, want one api error saying it cannot reach %s:\n%s", errs, deadURL, r)
	}
	id := jsonField(t, r, "session_id")

	// The server that answers listens on another port, so the session
	// (which records the dead URL) must be told that this is on purpose.
	up := newFakeUpgrade(t, sim.Options{Seed: 1})
	c.env["UPGRADE_API_URL"] = up.URL()
	r = c.run("ask", "--session", id, "-o", "json", "--llm", c.script("list.yaml", listScript), "And now?")
	wantCode(t, r, 2)
	wantContains(t, r, "was proposed against UpGrade "+deadURL, "--allow-other-server")
	r = c.run("ask", "--session", id, "--allow-other-server", "-o", "json", "--llm", c.script("list.yaml", listScript), "And now?")
	wantCode(t, r, 0)
	if errs := turnErrors(t, r); len(errs) != 0 {
		t.Errorf("errors after the server came back: %v", errs)
	}
	var res struct {
		Turn int `json:"turn"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Turn != 2 {
		t.Errorf("turn %d (%v), want 2: the session did not go on", res.Turn, err)
	}
}

// TestUpgradeUnreachableCommand: a direct command against a dead server
// exits 1 naming the URL (the same retries as above).
func TestUpgradeUnreachableCommand(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(nil)
	deadURL := dead.URL + "/api"
	dead.Close()
	c := newCLI(t)
	r := c.run("--upgrade-url", deadURL, "experiments", "list")
	wantCode(t, r, 1)
	wantContains(t, r, "Error: cannot reach UpGrade at "+deadURL)
}
