package quality

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The behaviour suite plays the tool-call habits of real models (GPT,
// Claude, Llama, Qwen) through the command line: each case is a short
// conversation run by the real CLI in process, against a scripted model
// served over HTTP through the go-openai client (the server behind
// `--llm script:FILE`, reached here as an OpenAI-compatible base URL so
// that the test can read every request the CLI sent) and a simulated
// UpGrade on loopback. A case checks the JSON output of every turn and the
// backend after the last one; the harness checks, for every case, what must
// hold whatever the habit:
//
//   - an action runs only in the turn after it was shown, approved by the
//     person's words, with exactly the params shown;
//   - the params shown are canonical: binding them again gives the same
//     bytes and hash, so the approval survives the checkpoint;
//   - every scripted reply is used and no call goes unanswered, and the turn
//     never ends on a limit (no loop without end);
//   - every error result and problem sent to the model is plain: no Go
//     internals, no problem said twice, no field named twice.

// behaviourCase is one conversation.
type behaviourCase struct {
	name  string
	steps []turnStep
	// backend is checked after the last step.
	backend []check
	// seed, when set, arranges more on the backend before the first step.
	seed func(t *testing.T, w *world)
}

// turnStep is one command line: a message (the first starts the session),
// the scripted model's replies for it, and what its JSON output must show.
type turnStep struct {
	say  string
	llm  string   // YAML replies; the placeholders of world.fill are filled in
	args []string // extra flags
	want turnWant
}

// turnWant is what one turn's JSON output must show. The zero value is a
// completed turn that ran nothing.
type turnWant struct {
	status pipeline.Status // default completed
	// confirm is the action of the confirmation shown; params a JSON object
	// its params contain (the template is filled in); exact the params, in
	// any spelling the binder accepts, that must canonicalise to exactly
	// the params shown.
	confirm, params, exact string
	// ran is the action this turn executed (always exactly as shown in the
	// turn before).
	ran string
	// calls is the number of LLM calls, when not 0.
	calls int
	// field is a field an error entry of the output names.
	field string
	// toolError are substrings of one error result the model was sent.
	toolError []string
	// seen are substrings of one tool result (not an error) the model was
	// sent; unseen must be in none.
	seen, unseen []string
	// result are substrings of the executed action's result.
	result []string
	// response are substrings of the reply text; noResponse must not be.
	response, noResponse []string
}

// world is one case's backend: the simulator and the ids of the
// experiments made before the conversation.
type world struct {
	srv *sim.Server
	ids map[string]string
}

// The context of three conditions, for weights in thirds.
const trioContext = "reading-lab"

func behaviourMetadata() upgrade.ContextMetadata {
	md := upgrade.DefaultContextMetadata()
	md[trioContext] = upgrade.ContextInfo{
		Conditions: []string{"baseline", "hint", "worked-example"},
		GroupTypes: []string{"classId"},
		ExpIDs:     []string{"chapter-1"},
		ExpPoints:  []string{"ReadPage"},
	}
	return md
}

// seeds are the experiments every case starts with.
var seeds = []struct {
	p     actions.CreateExperimentParams
	state upgrade.State
}{
	{create("Math Hints", "assign-prog", "SelectSection/absolute_value_plot_equality", "control:50", "variant:50"), upgrade.StateInactive},
	{create("Math Hints Live", "assign-prog", "SelectSection/analyzing_step_functions", "control:50", "variant:50"), upgrade.StateEnrolling},
	{create("Stream Hints", "mathstream", "lesson-stream/question-hint", "question-hint-default:50", "question-hint-tutorbot:50"), upgrade.StateEnrolling},
	{create("Reading Trio", trioContext, "ReadPage/chapter-1", "baseline:33.33", "hint:33.33", "worked-example:33.34"), upgrade.StateInactive},
}

// create builds create params from "site/target" and "code:weight".
func create(name, ctx, dp string, conds ...string) actions.CreateExperimentParams {
	site, target, _ := strings.Cut(dp, "/")
	p := actions.CreateExperimentParams{Name: name, Context: ctx,
		DecisionPoints: []actions.DecisionPointParam{{Site: site, Target: target}}}
	for _, c := range conds {
		code, w, _ := strings.Cut(c, ":")
		var f float64
		fmt.Sscan(w, &f)
		p.Conditions = append(p.Conditions, actions.ConditionParam{Code: code, Weight: &f})
	}
	return p
}

func newWorld(t *testing.T) *world {
	t.Helper()
	srv, err := sim.Start(sim.Options{Seed: 3, Metadata: behaviourMetadata()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	api, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{srv: srv, ids: map[string]string{}}
	ctx := context.Background()
	for _, s := range seeds {
		raw, err := actions.Run(ctx, api, s.p)
		if err != nil {
			t.Fatalf("seed %s: %v", s.p.Name, err)
		}
		var res actions.ExperimentResult
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		w.ids[s.p.Name] = res.ID
		if s.state != upgrade.StateInactive {
			if _, err := srv.Sim().SetState(res.ID, s.state); err != nil {
				t.Fatal(err)
			}
		}
	}
	seedFlags(t, w, api)
	if _, err := srv.Sim().InitUser("student1", upgrade.InitRequest{
		Group: map[string][]string{"classId": {"c1"}}, WorkingGroup: map[string]string{"classId": "c1"}}); err != nil {
		t.Fatal(err)
	}
	return w
}

var placeholder = regexp.MustCompile(`\{\{(id|prefix|upper):([^}]+)\}\}`)

// fill puts the seeded experiments' ids into a script or a JSON template:
// {{id:NAME}}, its first eight characters {{prefix:NAME}}, or in upper
// case {{upper:NAME}}.
func (w *world) fill(t *testing.T, s string) string {
	t.Helper()
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		p := placeholder.FindStringSubmatch(m)
		id, ok := w.ids[p[2]]
		if !ok {
			t.Fatalf("no seeded experiment %q", p[2])
		}
		switch p[1] {
		case "prefix":
			return id[:8]
		case "upper":
			return strings.ToUpper(id)
		}
		return id
	})
}

// experiment is the stored experiment of that name, or nil.
func (w *world) experiment(name string) *upgrade.Experiment {
	for _, e := range w.srv.Sim().Experiments() {
		if e.Name == name {
			return &e
		}
	}
	return nil
}

// runBehaviour plays each case in a subtest of its own, in parallel: each
// has its own simulator, scripted model and state dir.
func runBehaviour(t *testing.T, cases []behaviourCase) {
	t.Helper()
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("two cases named %q", tc.name)
		}
		if len(tc.backend) == 0 {
			t.Fatalf("case %q checks nothing on the backend", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			playCase(t, tc)
		})
	}
}

// playCase runs one conversation and checks it.
func playCase(t *testing.T, tc behaviourCase) {
	w := newWorld(t)
	if tc.seed != nil {
		tc.seed(t, w)
	}
	model := llmtest.NewServer(nil)
	t.Cleanup(model.Close)
	c := newCLI(t)
	c.env["OPENAI_API_KEY"] = "sk-behaviour-test-000000000000"
	c.env["OPENAI_BASE_URL"] = model.URL()
	c.env["UPGRADE_API_URL"] = w.srv.URL()
	var (
		session string
		shown   *pipeline.ConfirmationOut // the confirmation the last turn left
		seen    int                       // requests already checked
	)
	for i, st := range tc.steps {
		st = goShowsProposal(st, shown)
		replies, err := llmtest.ParseScript([]byte(w.fill(t, st.llm)), fmt.Sprintf("step%d.yaml", i+1))
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		model.Enqueue(replies...)
		args := []string{"ask", "-o", "json"}
		if session != "" {
			args = append(args, "--session", session)
		}
		args = append(append(args, st.args...), st.say)
		r := c.run(args...)
		step := fmt.Sprintf("step %d (%q)", i+1, st.say)
		reqs := model.Requests()
		if err := model.Verify(); err != nil {
			t.Fatalf("%s: the scripted model: %v\n%s%s", step, err, r, toolLog(reqs[seen:]))
		}
		var res pipeline.Result
		if err := decodeJSON(r.stdout, &res); err != nil {
			t.Fatalf("%s: JSON output: %v\n%s", step, err, r)
		}
		session = res.SessionID
		checkTurn(t, step, w, st.want, r, &res, shown, reqs[seen:])
		seen = len(reqs)
		shown = res.Confirmation
	}
	for _, ch := range tc.backend {
		ch(t, w)
	}
}

// exitFor is the exit code of a turn status (spec/cli.md).
var exitFor = map[pipeline.Status]int{pipeline.StatusCompleted: 0, pipeline.StatusAwaitingConfirmation: 10, pipeline.StatusWaitingJob: 11}

// toolLog lists the tool results the model was sent, for failures.
func toolLog(reqs []llmtest.RecordedRequest) string {
	var b strings.Builder
	b.WriteString("--- tool results sent to the model:\n")
	for _, m := range toolMessages(reqs) {
		c := m.Content
		if len(c) > 600 {
			c = c[:600] + "..."
		}
		fmt.Fprintf(&b, "%s: %s\n", m.Name, c)
	}
	return b.String()
}

// goShowsProposal adapts a step that proposes an action (a new request,
// or a no that changes the pending one) to reply_wording go: the
// confirmation is the reply, rendered in Go, so the responder's reply the
// fixture ends with is never asked for, and the turn makes one LLM call
// fewer. An unclear answer to a pending confirmation is still answered by
// the responder.
func goShowsProposal(st turnStep, pending *pipeline.ConfirmationOut) turnStep {
	change := strings.HasPrefix(strings.ToLower(st.say), "no")
	if st.want.confirm == "" || (pending != nil && !change) || !strings.HasSuffix(st.llm, respond) {
		return st
	}
	st.llm = strings.TrimSuffix(st.llm, respond)
	if st.want.calls > 0 {
		st.want.calls--
	}
	return st
}

func checkTurn(t *testing.T, step string, w *world, want turnWant, r result, res *pipeline.Result, shown *pipeline.ConfirmationOut, reqs []llmtest.RecordedRequest) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s\n%s%s", step, fmt.Sprintf(format, args...), r, toolLog(reqs))
	}
	status := want.status
	if status == "" {
		status = pipeline.StatusCompleted
	}
	if res.Status != status {
		fail("status %q, want %q", res.Status, status)
	}
	if code := exitFor[status]; r.code != code {
		fail("exit code %d, want %d", r.code, code)
	}
	if res.TerminationReason != "" && strings.Contains(res.TerminationReason, "limit") {
		fail("the turn ended on a limit: %s", res.TerminationReason)
	}
	if want.calls != 0 && res.Usage.LLMCalls != want.calls {
		fail("%d LLM calls, want %d", res.Usage.LLMCalls, want.calls)
	}

	// What ran is exactly what the turn before showed.
	switch {
	case want.ran == "" && len(res.Actions) > 0:
		fail("ran %s, want nothing run", res.Actions[0].Action)
	case want.ran != "":
		if len(res.Actions) != 1 {
			fail("ran %d actions, want exactly %s", len(res.Actions), want.ran)
		}
		a := res.Actions[0]
		if a.Action != want.ran || !strings.HasPrefix(a.Status, "success") {
			fail("ran %s (%s: %s), want %s to succeed", a.Action, a.Status, a.Error, want.ran)
		}
		if shown == nil || shown.Action != a.Action || !jsonEqual(shown.Params, a.Params) {
			fail("ran %s %s, but the confirmation shown was %+v", a.Action, a.Params, shown)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, a.Result); err != nil {
			fail("the result of %s is not JSON: %v", a.Action, err)
		}
		for _, s := range want.result {
			if !strings.Contains(compact.String(), w.fill(t, s)) {
				fail("the result of %s lacks %q: %s", a.Action, w.fill(t, s), compact.String())
			}
		}
	}

	// The confirmation shown, in its canonical form.
	if c := res.Confirmation; c != nil {
		if want.confirm == "" {
			fail("a confirmation of %s %s was shown; want none", c.Action, c.Params)
		}
		if c.Action != want.confirm {
			fail("confirmation of %s, want %s", c.Action, want.confirm)
		}
		b, err := actions.Bind(c.Action, c.Params)
		if err != nil || !jsonEqual(b.Params, c.Params) {
			fail("the params shown are not canonical: bound again they give %s (%v)", b.Params, err)
		}
		if again, err := actions.Bind(c.Action, b.Params); err != nil || again.Hash != b.Hash {
			fail("binding is not idempotent: %s, then %v (%v)", b.Params, again, err)
		}
		if want.params != "" && !jsonSubset(w.fill(t, want.params), c.Params) {
			fail("confirmation params %s do not contain %s", c.Params, w.fill(t, want.params))
		}
		if want.exact != "" {
			e, err := actions.Bind(c.Action, json.RawMessage(w.fill(t, want.exact)))
			if err != nil {
				t.Fatalf("%s: exact params: %v", step, err)
			}
			if e.Hash != b.Hash {
				fail("the params shown %s differ from the canonical %s", c.Params, e.Params)
			}
		}
	} else if want.confirm != "" {
		fail("no confirmation shown, want one of %s", want.confirm)
	}

	for _, e := range res.Errors {
		plainProblems(t, step, []string{e.Message})
	}
	for _, s := range want.noResponse {
		if strings.Contains(res.Response, s) {
			fail("response holds %q", s)
		}
	}
	if want.field != "" && !slices.ContainsFunc(res.Errors, func(e pipeline.ErrorEntry) bool { return e.Field == want.field }) {
		fail("no error names field %q: %+v", want.field, res.Errors)
	}
	for _, s := range want.response {
		if !strings.Contains(res.Response, s) {
			fail("response lacks %q", s)
		}
	}
	fillAll := func(ss []string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = w.fill(t, s)
		}
		return out
	}
	checkToolErrors(t, step, reqs, fillAll(want.toolError))
	checkToolResults(t, step, reqs, fillAll(want.seen), fillAll(want.unseen))
}

// checkToolResults checks what the model was sent: one tool result (not
// an error) or turn report holds every string of seen, no tool result
// holds one of unseen.
func checkToolResults(t *testing.T, step string, reqs []llmtest.RecordedRequest, seen, unseen []string) {
	t.Helper()
	if len(seen) == 0 && len(unseen) == 0 {
		return
	}
	var results []string
	for _, m := range toolMessages(reqs) {
		if !strings.HasPrefix(m.Content, `{"error":`) {
			results = append(results, m.Content)
		}
	}
	for _, s := range unseen {
		for _, r := range results {
			if strings.Contains(r, s) {
				t.Errorf("%s: a tool result holds %q: %s", step, s, r)
			}
		}
	}
	// What the responder is told comes in its user message (the turn
	// report), not in a tool result.
	for _, rq := range reqs {
		if n := len(rq.Messages); n > 0 && rq.Messages[n-1].Role == "user" {
			results = append(results, rq.Messages[n-1].Content)
		}
	}
	found := len(seen) == 0
	for _, r := range results {
		all := true
		for _, s := range seen {
			all = all && strings.Contains(r, s)
		}
		found = found || all
	}
	if !found {
		t.Errorf("%s: no tool result holds %q; the results were %q", step, seen, results)
	}
}

// toolMessages are the tool results of these requests, each once.
func toolMessages(reqs []llmtest.RecordedRequest) []llmtest.Message {
	seen := map[string]bool{}
	var out []llmtest.Message
	for _, rq := range reqs {
		for _, m := range rq.Messages {
			if m.Role == "tool" && !seen[m.ToolCallID] {
				seen[m.ToolCallID] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// plainProblems checks the problems of one tool result: no Go
// internals, none said twice.
func plainProblems(t *testing.T, step string, problems []string) {
	t.Helper()
	for i, p := range problems {
		if g := goInternals.FindString(p); g != "" {
			t.Errorf("%s: a tool result shows Go internals (%q): %s", step, g, p)
		}
		if slices.Contains(problems[:i], p) {
			t.Errorf("%s: a tool result says %q twice: %q", step, p, problems)
		}
		if field, rest, ok := strings.Cut(p, ": "); ok && !strings.Contains(field, " ") && strings.HasPrefix(rest, field+" ") {
			t.Errorf("%s: a tool result names %s twice: %q", step, field, p)
		}
	}
}

// goInternals are what a tool error must never show the model.
var goInternals = regexp.MustCompile(`json: |interface \{\}|map\[string\]|\bstruct\b|reflect\.|\*?\b(actions|pipeline|upgrade|llm)\.[A-Z]|Go value|unmarshal|\bpanic\b|%!`)

// checkToolErrors checks every error result the model was sent in these
// requests: plain words, each problem once. want are substrings one of
// them must hold.
func checkToolErrors(t *testing.T, step string, reqs []llmtest.RecordedRequest, want []string) {
	t.Helper()
	var errs []string
	for _, m := range toolMessages(reqs) {
		var body struct {
			Error    string
			Problems []string
		}
		if err := json.Unmarshal([]byte(m.Content), &body); err != nil {
			continue // a result that is not an object (a list) holds no error
		}
		if body.Error != "" {
			errs = append(errs, body.Error)
			plainProblems(t, step, strings.Split(body.Error, "; "))
		}
		plainProblems(t, step, body.Problems)
	}
	if len(want) == 0 {
		return
	}
	for _, e := range errs {
		ok := true
		for _, s := range want {
			ok = ok && strings.Contains(e, s)
		}
		if ok {
			return
		}
	}
	t.Errorf("%s: no tool error holds %q; the errors sent were %q", step, want, errs)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// jsonSubset reports whether every member of the object sub is in doc
// with an equal value (objects compared member by member, lists whole).
func jsonSubset(sub string, doc []byte) bool {
	var s, d any
	if json.Unmarshal([]byte(sub), &s) != nil || json.Unmarshal(doc, &d) != nil {
		return false
	}
	return subset(s, d)
}

func subset(s, d any) bool {
	sm, ok := s.(map[string]any)
	if !ok {
		return reflect.DeepEqual(s, d)
	}
	dm, ok := d.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range sm {
		if !subset(v, dm[k]) {
			return false
		}
	}
	return true
}

// ---- backend checks ----

// check is one fact about the backend after the conversation.
type check func(t *testing.T, w *world)

// hasExp: the experiment exists in that state with exactly these
// conditions ("code:weight", in order).
func hasExp(name string, state upgrade.State, conds ...string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		e := w.experiment(name)
		if e == nil {
			t.Fatalf("backend: no experiment %q", name)
		}
		if e.State != state {
			t.Errorf("backend: %s is %s, want %s", name, e.State, state)
		}
		if len(conds) == 0 {
			return
		}
		var got []string
		for _, c := range e.Conditions {
			got = append(got, fmt.Sprintf("%s:%g", c.ConditionCode, c.AssignmentWeight))
		}
		if !slices.Equal(got, conds) {
			t.Errorf("backend: %s has conditions %v, want %v", name, got, conds)
		}
	}
}

// noExp: no experiment of that name exists.
func noExp(name string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if w.experiment(name) != nil {
			t.Errorf("backend: experiment %q exists", name)
		}
	}
}

// experiments: the number of experiments.
func experiments(n int) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if got := len(w.srv.Sim().Experiments()); got != n {
			t.Errorf("backend: %d experiments, want %d", got, n)
		}
	}
}

// hasUser: the user exists with these groups ("type:id,id").
func hasUser(id string, groups ...string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		u, ok := w.srv.Sim().User(id)
		if !ok {
			t.Fatalf("backend: no user %q", id)
		}
		for _, g := range groups {
			typ, ids, _ := strings.Cut(g, ":")
			if got := strings.Join(u.Group[typ], ","); got != ids {
				t.Errorf("backend: user %s group %s = %q, want %q", id, typ, got, ids)
			}
		}
	}
}

// noUser: no user of that id exists.
func noUser(id string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if _, ok := w.srv.Sim().User(id); ok {
			t.Errorf("backend: user %q exists", id)
		}
	}
}

// enrolled: the experiment has that many users enrolled and excluded.
func enrolled(name string, users, excluded int) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		st, err := w.srv.Sim().EnrollmentStats(w.ids[name])
		if err != nil {
			t.Fatalf("backend: enrollment of %s: %v", name, err)
		}
		if st.Users != users || st.UsersExcluded != excluded {
			t.Errorf("backend: %s has %d users enrolled and %d excluded, want %d and %d", name, st.Users, st.UsersExcluded, users, excluded)
		}
	}
}

// users: the number of users the backend knows.
func users(n int) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if got := len(w.srv.Sim().Users()); got != n {
			t.Errorf("backend: %d users, want %d", got, n)
		}
	}
}

// seeded: the seeded experiments are as they were made (nothing changed).
func seeded() check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if got := len(w.srv.Sim().Experiments()); got != len(seeds) {
			t.Errorf("backend: %d experiments, want the %d seeded", got, len(seeds))
		}
		for _, s := range seeds {
			e := w.experiment(s.p.Name)
			if e == nil {
				t.Errorf("backend: seeded experiment %q is gone", s.p.Name)
				continue
			}
			if e.State != s.state || len(e.Conditions) != len(s.p.Conditions) {
				t.Errorf("backend: %s changed: state %s, %d conditions", s.p.Name, e.State, len(e.Conditions))
				continue
			}
			for i, c := range e.Conditions {
				if c.AssignmentWeight != *s.p.Conditions[i].Weight {
					t.Errorf("backend: %s weights changed: %s at %g", s.p.Name, c.ConditionCode, c.AssignmentWeight)
				}
			}
		}
		if got := len(w.srv.Sim().Users()); got != 1 {
			t.Errorf("backend: %d users, want the 1 seeded", got)
		}
	}
}
