//go:build unix

package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/internal/pgtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
	"github.com/upgrade-agent/upgrade-agent/store/pgstore"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// stopPostgresAfter stops the test binary's PostgreSQL cluster, if a test
// started one, once every test has run.
type stopPostgresAfter struct{ m *testing.M }

func (s stopPostgresAfter) Run() int {
	code := s.m.Run()
	pgtest.StopShared()
	return code
}

// team is one shared store that several machines name.
type team struct {
	url      string
	password string
	upgrade  string // the shared UpGrade's API URL
	roots    []string
	outs     []string // everything the machines printed
}

// machine is a process environment of its own: its own HOME and state dir,
// the same database and the same UpGrade.
type machine struct {
	tm    *team
	env   []string
	state string
}

func newTeam(t *testing.T, upgradeURL string) *team {
	t.Helper()
	c := pgtest.Need(t)
	url, err := c.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return &team{url: url, password: c.Password, upgrade: upgradeURL}
}

func (tm *team) machine(t *testing.T, actor string, extra ...string) *machine {
	root := t.TempDir()
	tm.roots = append(tm.roots, root)
	state := filepath.Join(root, "state")
	env := agentEnv(t, append([]string{"HOME=" + root, "UPGRADE_AGENT_HOME=" + state, "UPGRADE_API_URL=" + tm.upgrade,
		"UPGRADE_AGENT_STORE=" + tm.url, "UPGRADE_AGENT_ACTOR=" + actor, "OPENAI_API_KEY=sk-team-test-key-0123456789"}, extra...)...)
	return &machine{tm: tm, env: env, state: state}
}

// run runs a command line in this process as the machine.
func (m *machine) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	code, o, e := agentIn(t, m.env, args...)
	m.tm.outs = append(m.tm.outs, o, e)
	return code, o, e
}

// must runs a command line and checks its exit code.
func (m *machine) must(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, o, e := m.run(t, args...)
	if code != want {
		t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, o, e)
	}
	return o
}

// checkNoPassword: the database password is in no output and no file of
// any machine.
func (tm *team) checkNoPassword(t *testing.T) {
	t.Helper()
	for _, o := range tm.outs {
		if strings.Contains(o, tm.password) {
			t.Errorf("output contains the store password:\n%s", o)
		}
	}
	for _, r := range tm.roots {
		checkNoSecrets(t, r, tm.password)
	}
}

func (m *machine) pending(t *testing.T) []PendingRow {
	t.Helper()
	var rows []PendingRow
	if err := json.Unmarshal([]byte(m.must(t, 0, "sessions", "list", "--pending", "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

func (m *machine) audit(t *testing.T, session string) []audit.Entry {
	t.Helper()
	var es []audit.Entry
	if err := json.Unmarshal([]byte(m.must(t, 0, "audit", "--session", session, "-o", "json")), &es); err != nil {
		t.Fatal(err)
	}
	return es
}

func events(es []audit.Entry) string {
	var names []string
	for _, e := range es {
		names = append(names, e.Event)
	}
	return strings.Join(names, ",")
}

// proposeDoomed makes machine m propose deleting Doomed and returns the session.
func proposeDoomed(t *testing.T, m *machine) string {
	t.Helper()
	script := writeTestFile(t, t.TempDir(), "propose.yaml", proposeDelete)
	out := m.must(t, 10, "ask", "-o", "json", "--llm", "script:"+script, "delete Doomed")
	return decodeResult(t, out).SessionID
}

// A confirmation proposed by a CI machine is listed on a person's machine,
// approved there and executed exactly once; the audit trail names who
// proposed, who approved and what the server answered, with the database
// role; the password is found nowhere.
func TestTeamProposeOnOneMachineApproveOnAnother(t *testing.T) {
	s, tp, c := simTap(t, 1)
	mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
	tm := newTeam(t, tp.URL()+"/api")
	ci, alice := tm.machine(t, "ci@runner"), tm.machine(t, "alice@laptop")

	id := proposeDoomed(t, ci)
	rows := alice.pending(t)
	if len(rows) != 1 {
		t.Fatalf("inbox on the other machine: %+v, want the one confirmation", rows)
	}
	r := rows[0]
	if r.Session != id || r.Action != "delete_experiment" || r.Target != "Doomed" || !r.Destructive || r.ProposedBy != "ci@runner" ||
		r.ExpiresAt == nil || r.Expired || r.Confirm.ID == "" || !strings.Contains(r.Confirm.Message, "Doomed") {
		t.Errorf("inbox row %+v", r)
	}
	table := alice.must(t, 0, "sessions", "list", "--pending")
	for _, want := range []string{"SESSION", "PROPOSED BY", "EXPIRES", id, "delete_experiment", "Doomed", "ci@runner"} {
		if !strings.Contains(table, want) {
			t.Errorf("inbox table lacks %q:\n%s", want, table)
		}
	}
	if y := alice.must(t, 0, "sessions", "list", "--pending", "-o", "yaml"); !strings.Contains(y, "params_hash:") || !strings.Contains(y, "message:") {
		t.Errorf("yaml inbox lacks the full confirmation:\n%s", y)
	}

	done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Done.\n")
	alice.must(t, 0, "resume", id, "--answer", "yes", "-v", "--llm", "script:"+done)
	if n := tp.countServed(http.MethodDelete, ""); n != 1 {
		t.Errorf("the delete reached UpGrade %d times, want once", n)
	}
	if countNamed(s, "Doomed") != 0 {
		t.Error("Doomed still exists")
	}
	if rows := ci.pending(t); len(rows) != 0 {
		t.Errorf("inbox after the approval: %+v", rows)
	}
	es := ci.audit(t, id)
	if got := events(es); got != "proposed,approved,executed" {
		t.Fatalf("audit events %s, want proposed,approved,executed (%+v)", got, es)
	}
	if es[0].Actor != "ci@runner" || es[1].Actor != "alice@laptop" || es[2].Actor != "alice@laptop" {
		t.Errorf("actors %q %q %q", es[0].Actor, es[1].Actor, es[2].Actor)
	}
	for _, e := range es {
		if e.DBUser != pgtest.Admin || e.ConfirmationID != r.Confirm.ID || e.Target != "Doomed" || e.ParamsHash != r.Confirm.ParamsHash {
			t.Errorf("entry %+v: want db_user %s, confirmation %s, target Doomed", e, pgtest.Admin, r.Confirm.ID)
		}
	}
	if es[2].Outcome != audit.OutcomeSuccess || len(es[2].Answer) == 0 {
		t.Errorf("executed entry %+v: want success with the server's answer", es[2])
	}
	all := alice.must(t, 0, "audit", "-o", "wide")
	for _, want := range []string{"proposed", "approved", "executed", "ci@runner", "alice@laptop", pgtest.Admin} {
		if !strings.Contains(all, want) {
			t.Errorf("audit table lacks %q:\n%s", want, all)
		}
	}
	tm.checkNoPassword(t)
}

// A denial and an expiry are recorded; a yes to an expired confirmation
// re-plans and asks again (exit 10) and writes nothing. The expiry is the
// proposing machine's: an approver whose own approval_ttl is 0 (never)
// cannot approve what the inbox shows expired.
func TestTeamDenialAndExpiry(t *testing.T) {
	_, tp, c := simTap(t, 1)
	mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
	tm := newTeam(t, tp.URL()+"/api")
	ci, bob := tm.machine(t, "ci@runner"), tm.machine(t, "bob@desk")
	done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Fine.\n")

	id := proposeDoomed(t, ci)
	bob.must(t, 0, "resume", id, "--answer", "no", "--llm", "script:"+done)
	if got := events(bob.audit(t, id)); got != "proposed,denied" {
		t.Errorf("after a no: %s, want proposed,denied", got)
	}

	short := writeTestFile(t, t.TempDir(), "config.yaml", "approval_ttl: 1ms\n")
	never := writeTestFile(t, t.TempDir(), "config.yaml", "approval_ttl: 0s\n")
	hasty := tm.machine(t, "ci@hasty", "UPGRADE_AGENT_CONFIG="+short)
	late := tm.machine(t, "carol@home", "UPGRADE_AGENT_CONFIG="+never)
	id2 := proposeDoomed(t, hasty)
	if rows := ci.pending(t); len(rows) != 1 || !rows[0].Expired || rows[0].ExpiresAt == nil {
		t.Errorf("inbox of a machine with the default ttl: %+v, want the confirmation shown expired (its expiry is fixed at proposal)", rows)
	}
	if rows := late.pending(t); len(rows) != 1 || !rows[0].Expired {
		t.Errorf("inbox under approval_ttl 1ms: %+v, want the confirmation shown expired", rows)
	}
	if tbl := late.must(t, 0, "sessions", "list", "--pending"); !strings.Contains(tbl, "expired") {
		t.Errorf("inbox table does not say expired:\n%s", tbl)
	}
	code, o, e := late.run(t, "resume", id2, "--answer", "yes", "--llm", "script:"+done)
	if code != 10 || !strings.Contains(o+e, "expired") {
		t.Fatalf("yes to an expired confirmation: exit %d, want 10 saying it expired\n%s\n%s", code, o, e)
	}
	if n := tp.countServed(http.MethodDelete, ""); n != 0 {
		t.Errorf("an expired confirmation was executed (%d deletes)", n)
	}
	es := late.audit(t, id2)
	if got := events(es); got != "proposed,expired,proposed" {
		t.Fatalf("audit after the expiry: %s, want proposed,expired,proposed", got)
	}
	if es[1].ConfirmationID != es[0].ConfirmationID || es[2].ConfirmationID == es[0].ConfirmationID || es[1].Actor != "carol@home" {
		t.Errorf("expiry entries %+v", es)
	}
	// Within the ttl, the re-planned confirmation is approved and runs once.
	ci.must(t, 0, "resume", id2, "--answer", "yes", "--llm", "script:"+done)
	if n := tp.countServed(http.MethodDelete, ""); n != 1 {
		t.Errorf("deletes %d, want 1", n)
	}
	tm.checkNoPassword(t)
}

// A session held by a process on one machine is exit 12 on another at
// once; killed inside the confirmed write (SIGKILL), it leaves no stale
// lock, and the other machine finishes it: one write per approval.
func TestTeamLockAcrossMachinesAndCrashInsideWrite(t *testing.T) {
	for _, phase := range []struct {
		name   string
		served bool
	}{{"write arrived", onArrival}, {"write landed, answer held", onServed}} {
		t.Run(phase.name, func(t *testing.T) {
			_, tp, c := simTap(t, 1)
			mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
			tm := newTeam(t, tp.URL()+"/api")
			// A short UpGrade timeout: after the SIGKILL inside the write,
			// the other machine waits for the write's lease (2 x 3s + 3s)
			// before it reconciles (docs/teams.md, fencing).
			cfg := writeTestFile(t, t.TempDir(), "config.yaml", "upgrade_timeout: 3s\n")
			a, b := tm.machine(t, "ci@runner", "UPGRADE_AGENT_CONFIG="+cfg), tm.machine(t, "alice@laptop", "UPGRADE_AGENT_CONFIG="+cfg)
			id := proposeDoomed(t, a)
			done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Done.\n")

			at := tp.stopAt(is(http.MethodDelete, ""), phase.served, 0)
			p := startAgent(t, a.env, "resume", id, "--answer", "yes", "--llm", "script:"+done)
			waitClosed(t, at.hit, "the write to reach UpGrade")
			code, o, e := b.run(t, "resume", id, "--answer", "yes", "--llm", "script:"+done)
			if code != 12 {
				t.Fatalf("resume on another machine while the session is held: exit %d, want 12\n%s\n%s", code, o, e)
			}
			if !p.kill() {
				t.Fatalf("the holder ended before the kill:\n%s", p.out.String())
			}
			at.release()
			tm.outs = append(tm.outs, p.out.String())
			resumeUntilDone(t, b.env, id, "--llm", "script:"+done)
			if n := tp.countServed(http.MethodDelete, ""); n != 1 {
				t.Errorf("the delete reached UpGrade %d times, want exactly once", n)
			}
			if got := events(b.audit(t, id)); !strings.HasPrefix(got, "proposed,approved") || !strings.Contains(got, "executed") {
				t.Errorf("audit %s", got)
			}
			tm.checkNoPassword(t)
		})
	}
}

// A job whose worker was killed on one machine is finished by resume --wait
// on another, from its last committed batch, with exact counts.
func TestTeamJobTakenOverByAnotherMachine(t *testing.T) {
	s, g, url, expID := gatedSim(t)
	tm := newTeam(t, url)
	a, b := tm.machine(t, "ci@runner"), tm.machine(t, "alice@laptop")
	askScript, resumeScript := balanceScripts(t, expID, 300)

	session, jobID := askBalance(t, a.env, askScript)
	waitClosed(t, g.blocked, "the worker to reach the gate")
	js, pid := firstBatch(t, tm.url, jobID)
	var rec *jobs.Record
	var err error
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil && !bytes.Contains(environ, []byte("UPGRADE_AGENT_STORE=")) {
		t.Errorf("the worker did not get the store in its environment")
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(cmdline, []byte(tm.password)) {
		t.Errorf("the store password is on the worker's command line")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, "the killed worker to be gone", func() bool { return pidGone(pid) })
	close(g.open)

	resumeBalance(t, b.env, resumeScript, session, 300)
	if users := simUsersOfJob(s, jobID); users != 300 {
		t.Errorf("the simulator knows %d users of the job, want 300", users)
	}
	for i := 0; i < 50; i++ {
		if n := g.initsOf(actions.BalanceUserID(jobs.Key(jobID)+"-", i)); n != 1 {
			t.Errorf("user %d of the committed batch was initialised %d times, want once", i, n)
		}
	}
	rec, err = js.Load(jobID)
	if err != nil || rec.State != actions.JobSucceeded || rec.Attempts != 2 {
		t.Errorf("job record at the end: %+v %v", rec, err)
	}
	poll(t, "the second worker to exit", func() bool { return pidGone(rec.PID) })
	var shown JobDetail
	if err := json.Unmarshal([]byte(a.must(t, 0, "jobs", "show", jobID, "-o", "json")), &shown); err != nil || shown.State != actions.JobSucceeded {
		t.Errorf("jobs show on the first machine: %+v %v", shown, err)
	}
	if got := events(b.audit(t, session)); got != "approved,job_started,job_finished,executed" {
		t.Errorf("audit %s, want job_started ... job_finished, executed", got)
	}
	tm.checkNoPassword(t)
}

// A session moves between stores: exported from PostgreSQL, approved from
// a machine with the file store, executed once.
func TestTeamExportFromPostgresApproveFromFiles(t *testing.T) {
	_, tp, c := simTap(t, 1)
	mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
	tm := newTeam(t, tp.URL()+"/api")
	ci := tm.machine(t, "ci@runner")
	id := proposeDoomed(t, ci)
	file := filepath.Join(t.TempDir(), "artifact.json")
	ci.must(t, 0, "sessions", "export", id, "--file", file)
	if out := ci.must(t, 0, "sessions", "export", id); !strings.Contains(out, `"session_id":"`+id+`"`) {
		t.Errorf("export to stdout: %s", out)
	}

	root := t.TempDir()
	tm.roots = append(tm.roots, root)
	local := &machine{tm: tm, state: filepath.Join(root, "state"), env: agentEnv(t, "HOME="+root, "UPGRADE_AGENT_HOME="+filepath.Join(root, "state"),
		"UPGRADE_API_URL="+tp.URL()+"/api", "UPGRADE_AGENT_ACTOR=dana@offline")}
	if out := local.must(t, 0, "sessions", "import", file); strings.TrimSpace(out) != id {
		t.Errorf("import printed %q, want the id", out)
	}
	local.must(t, 0, "sessions", "import", file) // the same file again: a no-op
	done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Done.\n")
	local.must(t, 0, "resume", id, "--answer", "yes", "--llm", "script:"+done)
	if n := tp.countServed(http.MethodDelete, ""); n != 1 {
		t.Errorf("deletes %d, want 1", n)
	}
	if got := events(local.audit(t, id)); got != "approved,executed" {
		t.Errorf("file-store audit: %s, want approved,executed", got)
	}
	if _, err := os.Stat(filepath.Join(local.state, audit.FileName)); err != nil {
		t.Errorf("the file store's audit trail: %v", err)
	}
	// In the team store the session is still at the proposal the artifact
	// holds: importing it is a no-op. Once the session has moved on there,
	// the artifact is other content and is refused (exit 2).
	ci.must(t, 0, "sessions", "import", file)
	ci.must(t, 0, "resume", id, "--answer", "no", "--llm", "script:"+done)
	if code, _, e := ci.run(t, "sessions", "import", file); code != 2 || !strings.Contains(e, "already exists") {
		t.Errorf("import over a session that moved on: exit %d %s, want 2", code, e)
	}
	tm.checkNoPassword(t)
}

// The tool works under a least-privilege role: SELECT+INSERT only on the
// audit trail; db_user names that role.
func TestTeamLeastPrivilegeRole(t *testing.T) {
	_, tp, c := simTap(t, 1)
	mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
	tm := newTeam(t, tp.URL()+"/api")
	owner := tm.machine(t, "admin@ops")
	owner.must(t, 0, "sessions", "list") // the owner creates the schema
	db := tm.url[strings.LastIndex(tm.url, "/")+1 : strings.Index(tm.url, "?")]
	role := "app_" + db
	cl := pgtest.Need(t)
	stmts := append([]string{"CREATE ROLE " + role + " LOGIN PASSWORD '" + cl.Password + "'"}, pgstore.GrantStatements(role)...)
	for _, q := range stmts {
		if err := cl.Exec(db, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tm.url = cl.URL(db, role, cl.Password)
	app := tm.machine(t, "ci@runner")
	id := proposeDoomed(t, app)
	done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Done.\n")
	app.must(t, 0, "resume", id, "--answer", "yes", "--llm", "script:"+done)
	es := app.audit(t, id)
	if events(es) != "proposed,approved,executed" || es[0].DBUser != role {
		t.Errorf("audit under the app role: %+v", es)
	}
	tm.checkNoPassword(t)
}

// A database migrated by a newer binary is refused: exit 2, nothing written.
func TestTeamNewerSchemaRefused(t *testing.T) {
	tm := newTeam(t, "http://127.0.0.1:1/api")
	m := tm.machine(t, "x@y")
	m.must(t, 0, "sessions", "list")
	cl := pgtest.Need(t)
	db := tm.url[strings.LastIndex(tm.url, "/")+1 : strings.Index(tm.url, "?")]
	if err := cl.Exec(db, "UPDATE upgrade_agent_schema SET version = 7"); err != nil {
		t.Fatal(err)
	}
	code, o, e := m.run(t, "sessions", "list")
	if code != 2 || !strings.Contains(e, "version 7") {
		t.Errorf("newer schema: exit %d, want 2 naming the version\n%s\n%s", code, o, e)
	}
	// ask connects to the store in the background while it sets up the
	// model; the store's refusal still comes first, before a model that
	// cannot be set up.
	code, o, e = m.run(t, "ask", "--llm", "script:"+filepath.Join(t.TempDir(), "missing.yaml"), "hello")
	if code != 2 || !strings.Contains(e, "version 7") {
		t.Errorf("ask on a newer schema with a missing script: exit %d, want 2 naming the version\n%s\n%s", code, o, e)
	}
	tm.checkNoPassword(t)
}

func openPG(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// With a shared store, resume and ask --continue name the session: the
// most recent one may be a colleague's.
func TestTeamResumeNeedsASessionID(t *testing.T) {
	tm := newTeam(t, "http://127.0.0.1:1/api")
	m := tm.machine(t, "x@y")
	for _, args := range [][]string{{"resume", "--answer", "yes"}, {"ask", "--continue", "hello"}} {
		code, _, e := m.run(t, args...)
		if code != 2 || !strings.Contains(e, "needs a session id") {
			t.Errorf("%v: exit %d %s, want 2 asking for the id", args, code, e)
		}
	}
}

// jobs cancel is in the audit trail, here the file store's JSONL.
func TestAuditJobCancelledFileStore(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_AGENT_ACTOR=ops@desk")
	js, err := jobs.OpenStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := js.Create(&jobs.Record{ID: "job-1", SessionID: "s1", Action: "test_condition_balance",
		Params: json.RawMessage(`{"experiment_id":"e1","num_users":10}`), State: actions.JobQueued, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	if code, o, e := agentIn(t, env, "jobs", "cancel", "job-1"); code != 0 {
		t.Fatalf("jobs cancel: exit %d %s %s", code, o, e)
	}
	code, o, e := agentIn(t, env, "audit", "--actor", "ops@desk", "-o", "json")
	var es []audit.Entry
	if code != 0 || json.Unmarshal([]byte(o), &es) != nil || len(es) != 1 {
		t.Fatalf("audit: exit %d %s %s", code, o, e)
	}
	if e := es[0]; e.Event != audit.JobCancelled || e.JobID != "job-1" || e.SessionID != "s1" || e.Target != "e1" || e.Actor != "ops@desk" || e.DBUser != "" {
		t.Errorf("entry %+v", e)
	}
	if code, _, e := agentIn(t, env, "audit", "--since", "-1h"); code != 2 {
		t.Errorf("--since -1h: exit %d %s, want 2", code, e)
	}
}

// The lock connection of a machine executing an approved write drops (the
// database restarts, or idle_session_timeout ends it) while UpGrade holds
// the write; a second machine answers the same session meanwhile, yes or
// no. It waits until the first machine's write can no longer land, and the
// end is one write and an audit trail that says what happened: one
// approval, the write executed, no denial of a write that ran.
func TestTeamLockLostDuringHeldWrite(t *testing.T) {
	for _, variant := range []string{"restart", "idle"} {
		for _, answer := range []string{"yes", "no"} {
			t.Run(variant+"/"+answer, func(t *testing.T) {
				_, tp, c := simTap(t, 1)
				mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
				var tm *team
				var lose func()
				admin := ""
				if variant == "restart" {
					dc := pgtest.Dedicated(t)
					url, err := dc.NewDatabase()
					if err != nil {
						t.Fatal(err)
					}
					tm = &team{url: url, password: dc.Password, upgrade: tp.URL() + "/api"}
					admin = url
					lose = func() {
						if err := dc.Restart(); err != nil {
							t.Fatal(err)
						}
					}
				} else {
					tm = newTeam(t, tp.URL()+"/api")
					admin = tm.url
					tm.url += "&idle_session_timeout=1000"
					lose = func() {
						poll(t, "the holder's idle connections to end", func() bool {
							return countRows(t, admin, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`) == 0
						})
					}
				}
				// Long enough for the held write to outlast the restart and
				// the second machine's start on a loaded machine; nobody
				// waits for it unless the write's end goes unrecorded.
				cfg := writeTestFile(t, t.TempDir(), "config.yaml", "upgrade_timeout: 20s\n")
				a := tm.machine(t, "ci@runner", "UPGRADE_AGENT_CONFIG="+cfg)
				b := tm.machine(t, "alice@laptop", "UPGRADE_AGENT_CONFIG="+cfg)
				id := proposeDoomed(t, a)
				done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Done.\n")

				at := tp.stopAt(is(http.MethodDelete, ""), onArrival, 0)
				p := startAgent(t, a.env, "resume", id, "--answer", "yes", "--llm", "script:"+done)
				waitClosed(t, at.hit, "the write to reach UpGrade")
				lose()
				q := startAgent(t, b.env, "resume", id, "--answer", answer, "--llm", "script:"+done)
				poll(t, "the second machine to hold the session's lock", func() bool {
					return countRows(t, admin, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted`) > 0
				})
				at.release()
				p.wait(t)
				q.wait(t)
				tm.outs = append(tm.outs, p.out.String(), q.out.String())
				if n := tp.countServed(http.MethodDelete, ""); n != 1 {
					t.Fatalf("the delete reached UpGrade %d times, want once\nfirst machine:\n%s\nsecond machine:\n%s", n, p.out.String(), q.out.String())
				}
				resumeUntilDone(t, b.env, id, "--llm", "script:"+done)
				es := b.audit(t, id)
				got := events(es)
				if strings.Count(got, "approved") != 1 || !strings.Contains(got, "executed") || strings.Contains(got, "denied") {
					t.Errorf("audit %s: want one approval, the write executed, no denial\nfirst machine:\n%s\nsecond machine:\n%s", got, p.out.String(), q.out.String())
				}
				tm.checkNoPassword(t)
			})
		}
	}
}

// countRows runs a count query as the admin.
func countRows(t *testing.T, url, q string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// PostgreSQL restarts in the middle of a job: the worker that was running
// rides it out (a reconnect, not the process) and finishes its own job,
// from where it was, with exact counts; no other worker takes it over.
func TestTeamJobWorkerRidesOutRestart(t *testing.T) {
	s, g, url, expID := gatedSim(t)
	dc := pgtest.Dedicated(t)
	dbURL, err := dc.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	tm := &team{url: dbURL, password: dc.Password, upgrade: url}
	a := tm.machine(t, "ci@runner")
	askScript, resumeScript := balanceScripts(t, expID, 300)

	session, jobID := askBalance(t, a.env, askScript)
	waitClosed(t, g.blocked, "the worker to reach the gate")
	js, pid := firstBatch(t, tm.url, jobID)
	var rec *jobs.Record
	if err := dc.Restart(); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	poll(t, "the worker to finish the job", func() bool {
		rec, err = js.Load(jobID)
		return err == nil && rec.State == actions.JobSucceeded
	})
	if rec.PID != pid || rec.Attempts != 1 || pidGone(pid) && rec.Progress.Done != 300 {
		t.Errorf("after the restart: worker pid %d (was %d), attempts %d, done %d; want the same worker, one attempt, 300", rec.PID, pid, rec.Attempts, rec.Progress.Done)
	}
	if users := simUsersOfJob(s, jobID); users != 300 {
		t.Errorf("the simulator knows %d users of the job, want 300", users)
	}
	resumeBalance(t, a.env, resumeScript, session, 300)
	poll(t, "the worker to exit", func() bool { return pidGone(pid) })
	if log, err := os.ReadFile(filepath.Join(a.state, "jobs", jobID+".log")); err == nil && bytes.Contains(log, []byte("conn closed")) {
		t.Errorf("the worker's log shows a closed connection:\n%s", log)
	}
	tm.checkNoPassword(t)
}

// An actor and an experiment name carrying a NUL and an ESC sequence make
// no entry vanish: the create... delete's proposal, approval and execution
// are all in the trail, escaped; the chain verifies; --actor takes the
// text as audit shows it, and raw NUL or non-UTF-8 text there is exit 2.
func TestTeamHostileTextInTheTrail(t *testing.T) {
	_, tp, c := simTap(t, 1)
	name := "NulName\x00X \x1b[2K"
	id := mkExperiment(t, c, name, upgrade.StateEnrolling)
	tm := newTeam(t, tp.URL()+"/api")
	cfg := writeTestFile(t, t.TempDir(), "config.yaml", `actor: "mallory\0evil\e[2K"`+"\n")
	ci := tm.machine(t, "ci@runner", "UPGRADE_AGENT_CONFIG="+cfg)
	ci.env = slicesWithout(ci.env, "UPGRADE_AGENT_ACTOR=")
	script := writeTestFile(t, t.TempDir(), "propose.yaml", strings.ReplaceAll(proposeDelete, "experiment_id: Doomed", "experiment_id: "+id))
	session := decodeResult(t, ci.must(t, 10, "ask", "-o", "json", "--llm", "script:"+script, "delete it")).SessionID
	done := writeTestFile(t, t.TempDir(), "done.yaml", "- reply: Done.\n")
	ci.must(t, 0, "resume", session, "--answer", "yes", "--llm", "script:"+done)
	if n := tp.countServed(http.MethodDelete, ""); n != 1 {
		t.Fatalf("deletes %d, want 1", n)
	}
	es := ci.audit(t, session)
	if got := events(es); got != "proposed,approved,executed" {
		t.Fatalf("audit %s, want proposed,approved,executed", got)
	}
	wantActor, wantTarget := audit.Escape("mallory\x00evil\x1b[2K"), audit.Escape(name)
	for _, e := range es {
		if e.Actor != wantActor || e.Target != wantTarget || e.TargetID != id {
			t.Errorf("%s entry: actor %q target %q (%s), want %q %q (%s)", e.Event, e.Actor, e.Target, e.TargetID, wantActor, wantTarget, id)
		}
	}
	if out := ci.must(t, 0, "audit", "verify"); !strings.Contains(out, "verified: 3 entries") {
		t.Errorf("audit verify: %s", out)
	}
	var byActor []audit.Entry
	if err := json.Unmarshal([]byte(ci.must(t, 0, "audit", "--actor", wantActor, "-o", "json")), &byActor); err != nil || len(byActor) != 3 {
		t.Errorf("--actor as audit shows it: %d entries, %v", len(byActor), err)
	}
	for _, bad := range []string{"mallory\x00evil", "mallory\xffevil"} {
		code, _, e := ci.run(t, "audit", "--actor", bad)
		if code != 2 || !strings.Contains(e, "--actor") || strings.Contains(e, "SQLSTATE") {
			t.Errorf("--actor %q: exit %d, want 2 naming the flag\n%s", bad, code, e)
		}
	}
	tm.checkNoPassword(t)
}

// audit --session takes a unique prefix like every id; an unknown id is
// exit 2 (as for resume), never an empty trail; audit verify finds an
// edited line of the file trail and exits 2 naming it.
func TestAuditSessionPrefixAndVerify(t *testing.T) {
	_, tp, c := simTap(t, 1)
	mkExperiment(t, c, "Doomed", upgrade.StateEnrolling)
	root := t.TempDir()
	state := filepath.Join(root, "state")
	m := &machine{tm: &team{}, state: state, env: agentEnv(t, "HOME="+root, "UPGRADE_AGENT_HOME="+state,
		"UPGRADE_API_URL="+tp.URL()+"/api", "UPGRADE_AGENT_ACTOR=ci@runner", "OPENAI_API_KEY=sk-team-test-key-0123456789")}
	id := proposeDoomed(t, m)
	if got := events(m.audit(t, id[:4])); got != "proposed" {
		t.Errorf("audit --session %s (a prefix): %s, want proposed", id[:4], got)
	}
	for _, ref := range []string{"3f2a9c1b7d0e", "zz"} {
		if code, _, e := m.run(t, "audit", "--session", ref); code != 2 || !strings.Contains(e, "sessions list") {
			t.Errorf("audit --session %s: exit %d, want 2 pointing at sessions list\n%s", ref, code, e)
		}
	}
	if out := m.must(t, 0, "audit", "verify"); !strings.Contains(out, "verified: 1 entries") {
		t.Errorf("audit verify: %s", out)
	}
	path := filepath.Join(state, audit.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(`"actor":"ci@runner"`), []byte(`"actor":"someone"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, e := m.run(t, "audit", "verify")
	if code != 2 || !strings.Contains(e, path+":1") || !strings.Contains(e, "changed") {
		t.Errorf("audit verify of an edited trail: exit %d, want 2 naming %s:1\n%s", code, path, e)
	}
}

// slicesWithout drops the entries of env that start with prefix.
func slicesWithout(env []string, prefix string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// The inbox, sessions show and audit name a flag by its key, as it was when
// the confirmation was proposed, whatever the params hold (the model sent
// the flag's id); the id is in -o wide and JSON only.
func TestNamesWhereAPersonReads(t *testing.T) {
	_, tp, c := simTap(t, 1)
	mkFlag(t, c)
	flagID := crashFlag(t, c).ID
	root := t.TempDir()
	state := filepath.Join(root, "state")
	m := &machine{tm: &team{}, state: state, env: agentEnv(t, "HOME="+root, "UPGRADE_AGENT_HOME="+state,
		"UPGRADE_API_URL="+tp.URL()+"/api", "UPGRADE_AGENT_ACTOR=ci@runner", "OPENAI_API_KEY=sk-team-test-key-0123456789")}
	script := writeTestFile(t, t.TempDir(), "propose.yaml", `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: add a list, reasoning: action}
- call:
    set_action_needed: {action: add_feature_flag_list, reasoning: asked}
    set_action_params: {action_params: {flag_id: "`+flagID+`", kind: include, users: [u1]}}
- reply: About to add the list.
`)
	id := decodeResult(t, m.must(t, 10, "ask", "-o", "json", "--llm", "script:"+script, "add u1 to CRASH_FLAG")).SessionID

	rows := m.pending(t)
	if len(rows) != 1 || rows[0].Target != "CRASH_FLAG" || rows[0].TargetID != flagID || rows[0].ProposedBy != "ci@runner" {
		t.Fatalf("inbox JSON: %+v, want target CRASH_FLAG (%s) proposed by ci@runner", rows, flagID)
	}
	if tbl := m.must(t, 0, "sessions", "list", "--pending"); !strings.Contains(tbl, "CRASH_FLAG") || strings.Contains(tbl, flagID) {
		t.Errorf("inbox table names the flag by id or not by key:\n%s", tbl)
	}
	if wide := m.must(t, 0, "sessions", "list", "--pending", "-o", "wide"); !strings.Contains(wide, flagID) {
		t.Errorf("inbox -o wide lacks the flag's id:\n%s", wide)
	}
	if show := m.must(t, 0, "sessions", "show", id); !strings.Contains(show, "on CRASH_FLAG, proposed by ci@runner") {
		t.Errorf("sessions show does not name the flag and the proposer:\n%s", show)
	}
	es := m.audit(t, id)
	if len(es) != 1 || es[0].Target != "CRASH_FLAG" || es[0].TargetID != flagID {
		t.Fatalf("audit: %+v", es)
	}
	tbl := m.must(t, 0, "audit", "--session", id)
	if !strings.Contains(tbl, "CRASH_FLAG") || strings.Contains(tbl, flagID) {
		t.Errorf("audit table names the flag by id or not by key:\n%s", tbl)
	}
	if wide := m.must(t, 0, "audit", "--session", id, "-o", "wide"); !strings.Contains(wide, flagID) {
		t.Errorf("audit -o wide lacks the flag's id:\n%s", wide)
	}
}

// firstBatch waits until the job's worker has committed its first batch
// and returns the job records of the store at url and the worker's pid
// (killed at the end of the test if still running).
func firstBatch(t *testing.T, url, jobID string) (*jobs.Store, int) {
	t.Helper()
	js, err := jobs.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	js.Backend = openPG(t, url).Jobs()
	var rec *jobs.Record
	poll(t, "the first batch to be committed", func() bool {
		rec, err = js.Load(jobID)
		return err == nil && rec.Progress.Done == 50 && rec.PID > 0
	})
	t.Cleanup(func() {
		if r, err := js.Load(jobID); err == nil && r.PID > 0 && !pidGone(r.PID) {
			_ = syscall.Kill(r.PID, syscall.SIGKILL)
		}
	})
	return js, rec.PID
}

// simUsersOfJob counts the simulator's users of the job.
func simUsersOfJob(s *sim.Sim, jobID string) int {
	n := 0
	for _, u := range s.Users() {
		if strings.HasPrefix(u.ID, jobs.Key(jobID)+"-") {
			n++
		}
	}
	return n
}
