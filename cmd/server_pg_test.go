package cmd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The team store records a session's UpGrade as the file store does, and a
// resume against another UpGrade is refused (exit 2, naming both) before
// anything is read or changed; the recorded server goes through.
func TestTeamStoreRecordsServerAndRefusesAnother(t *testing.T) {
	s, tp, c := simTap(t, 1)
	mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
	_, other, _ := simTap(t, 2)
	tm := newTeam(t, tp.URL()+"/api")
	ci := tm.machine(t, "ci@runner")
	id := proposeDoomed(t, ci)

	var d SessionDetail
	if err := json.Unmarshal([]byte(ci.must(t, 0, "sessions", "show", id, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.UpgradeServer != tp.URL()+"/api" || !strings.HasPrefix(d.Path, "postgres ") {
		t.Fatalf("upgrade_server %q at %q: want %s/api in the PostgreSQL store", d.UpgradeServer, d.Path, tp.URL())
	}

	elsewhere := tm.machine(t, "alice@laptop", "UPGRADE_API_URL="+other.URL()+"/api")
	code, _, e := elsewhere.run(t, "resume", id[:6], "--answer", "yes")
	if code != 2 || !strings.Contains(e, "was proposed against UpGrade "+tp.URL()+"/api") ||
		!strings.Contains(e, "this run uses UpGrade "+other.URL()+"/api") || !strings.Contains(e, "--allow-other-server") {
		t.Fatalf("resume against another UpGrade: exit %d, want 2 naming both servers\n%s", code, e)
	}
	other.mu.Lock()
	if n := len(other.served); n != 0 {
		t.Errorf("the other UpGrade got %d requests, want none: %v", n, other.served)
	}
	other.mu.Unlock()
	if n := tp.countServed(http.MethodDelete, ""); n != 0 {
		t.Errorf("the delete reached the recorded UpGrade %d times before an approval", n)
	}

	alice := tm.machine(t, "alice@laptop")
	done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Done.\n")
	alice.must(t, 0, "resume", id, "--answer", "yes", "--llm", "script:"+done)
	if n := tp.countServed(http.MethodDelete, ""); n != 1 || countNamed(s, "Doomed") != 0 {
		t.Errorf("the delete reached UpGrade %d times, want once, and Doomed gone", n)
	}
	tm.checkNoPassword(t)
}
