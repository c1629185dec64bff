package scenario

import (
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

func load(t *testing.T, path string) *Scenario {
	t.Helper()
	sc, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func parse(t *testing.T, dir, name, body string) *Scenario {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return load(t, path)
}

func mustRun(t *testing.T, sc *Scenario, opts RunOptions) *Report {
	t.Helper()
	rep, err := Run(context.Background(), sc, opts)
	if err != nil {
		t.Fatalf("run %s: %v", sc.Name, err)
	}
	return rep
}

// TestWrongExpectationFailsReadably: the failure names the step, its input,
// the key, the expected and the actual value, and later steps do not run.
func TestWrongExpectationFailsReadably(t *testing.T) {
	rep := mustRun(t, load(t, filepath.Join("testdata", "wrong-expectation.yaml")), RunOptions{})
	if rep.Passed() {
		t.Fatal("a wrong expectation passed")
	}
	want := []string{`step 2 (answer "no"): status: expected awaiting_confirmation, got completed`}
	if d := cmp.Diff(want, rep.Failures); d != "" {
		t.Fatalf("failures (-want +got):\n%s", d)
	}
	if !strings.HasPrefix(rep.Summary(), "FAIL wrong-expectation (") || !strings.Contains(rep.Details(), "expected awaiting_confirmation") {
		t.Fatalf("summary %q details %q", rep.Summary(), rep.Details())
	}
	if !strings.Contains(rep.Transcript, "FAILED:") {
		t.Error("the transcript does not show the failure")
	}
}

func TestMissingReplyNamesNodeCallAndTools(t *testing.T) {
	rep := mustRun(t, load(t, filepath.Join("testdata", "short-script.yaml")), RunOptions{})
	all := strings.Join(rep.Failures, "\n")
	for _, want := range []string{
		`step 1 (say "Which experiments are running?"): scripted LLM: llmtest: call 3 (node gatherer, tools offered [check_upgrade_health, `,
		"no scripted reply left",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("failures lack %q:\n%s", want, all)
		}
	}
}

func TestLeftOverReplyFails(t *testing.T) {
	rep := mustRun(t, load(t, filepath.Join("testdata", "extra-reply.yaml")), RunOptions{})
	all := strings.Join(rep.Failures, "\n")
	if !strings.Contains(all, "1 scripted reply was never used") || !strings.Contains(all, "extra-reply.yaml:8") {
		t.Fatalf("failures: %s", all)
	}
}

func TestNormalizer(t *testing.T) {
	n := newNormalizer()
	n.learn([]upgrade.Experiment{{ID: "11111111-1111-4111-8111-111111111111",
		Conditions: []upgrade.Condition{{ID: "22222222-2222-4222-8222-222222222222"}},
		Partitions: []upgrade.DecisionPoint{{ID: "33333333-3333-4333-8333-333333333333"}}}})
	n.session = "scenario-session"
	n.urls = []string{"http://127.0.0.1:4567/api"}
	n.job("id-0004")
	in := strings.Join([]string{
		"cond 22222222-2222-4222-8222-222222222222 of 11111111-1111-4111-8111-111111111111 at 33333333-3333-4333-8333-333333333333",
		"again 11111111-1111-4111-8111-111111111111, unknown AAAAAAAA-0000-4000-8000-000000000000",
		"job id-0004 of scenario-session; confirmation id-0003; job id-0004",
		"at 2026-01-15T09:01:00Z and 2026-01-15T09:01:00.123+02:00",
		"GET http://127.0.0.1:4567/api/experiments, llm http://127.0.0.1:39999/v1",
	}, "\n")
	want := strings.Join([]string{
		"cond <cond-1> of <exp-1> at <dp-1>",
		"again <exp-1>, unknown <uuid-1>",
		"job <job-1> of <session>; confirmation <id-1>; job <job-1>",
		"at <time> and <time>",
		"GET <upgrade-url>/experiments, llm http://127.0.0.1:<port>/v1",
	}, "\n")
	if d := cmp.Diff(want, n.apply(in)); d != "" {
		t.Fatalf("normalised (-want +got):\n%s", d)
	}
}

func TestTemplates(t *testing.T) {
	r := newResolver()
	r.learn([]upgrade.Experiment{{ID: "e1", Name: "Math Hints", Conditions: []upgrade.Condition{{ID: "c1", ConditionCode: "control"}}}})
	r.session = "s1"
	tests := []struct{ in, want, err string }{
		{"id {{experiment:Math Hints}}", "id e1", ""},
		{"{{ experiment: Math Hints }}", "e1", ""},
		{"{{condition:Math Hints:control}}/{{session}}", "c1/s1", ""},
		{"no templates {{other}}", "no templates {{other}}", ""},
		{"{{experiment:Nope}}", "", `template {{experiment:Nope}}: no experiment named "Nope" on the backend (known: "Math Hints")`},
		{"{{condition:Math Hints:treatment}}", "", `experiment "Math Hints" has no condition "treatment"`},
		{"{{job}}", "", "no job has been started"},
	}
	for _, tt := range tests {
		got, err := r.expand(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("expand(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	// Replies are expanded in copies: the parsed scenario stays reusable.
	in := []llmtest.Reply{{Text: "{{session}}", Calls: []llmtest.Call{{Name: "x", Arguments: `{"id":"{{experiment:Math Hints}}"}`}}}}
	out, err := r.expandReplies(in)
	if err != nil || out[0].Text != "s1" || out[0].Calls[0].Arguments != `{"id":"e1"}` || in[0].Calls[0].Arguments != `{"id":"{{experiment:Math Hints}}"}` {
		t.Fatalf("expandReplies = %+v, %v (input now %+v)", out, err, in)
	}
}

func TestSubset(t *testing.T) {
	got := map[string]any{"a": 1.0, "b": []any{map[string]any{"c": "x", "d": true}}, "e": nil}
	tests := []struct {
		want any
		diff []string
	}{
		{map[string]any{"a": 1.0}, nil},
		{map[string]any{"b": []any{map[string]any{"c": "x"}}}, nil},
		{map[string]any{"missing": nil, "e": nil}, nil},
		{map[string]any{"a": 2.0}, []string{"p.a: expected 2, got 1"}},
		{map[string]any{"b": []any{}}, []string{`p.b: expected [], got [{"c":"x","d":true}]`}},
		{map[string]any{"z": "q"}, []string{`p.z: missing (expected "q")`}},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.diff, subset("p", tt.want, got)); d != "" {
			t.Errorf("subset(%v) (-want +got):\n%s", tt.want, d)
		}
	}
}

// TestParallelRunsMatchSequential: scenarios share nothing, so running them
// at once gives the transcripts of running them one by one.
func TestParallelRunsMatchSequential(t *testing.T) {
	root := repoRoot(t)
	var scs []*Scenario
	for _, n := range []string{"demo", "balance-job", "create-progressive", "upgrade-401", "init-assign-two-confirmations"} {
		sc := load(t, filepath.Join(root, "scenarios", n+".yaml"))
		sc.Golden = false
		scs = append(scs, sc)
	}
	seq := RunAll(context.Background(), scs, RunOptions{}, 1, nil)
	var emitted []string
	par := RunAll(context.Background(), scs, RunOptions{}, len(scs), func(r *Report) { emitted = append(emitted, r.Name) })
	var names []string
	for _, sc := range scs {
		names = append(names, sc.Name)
	}
	if d := cmp.Diff(names, emitted); d != "" {
		t.Errorf("reports were not emitted in order (-want +got):\n%s", d)
	}
	for i := range scs {
		if !seq[i].Passed() || !par[i].Passed() {
			t.Fatalf("%s failed: %v %v", scs[i].Name, seq[i].Failures, par[i].Failures)
		}
		if d := cmp.Diff(seq[i].Transcript, par[i].Transcript); d != "" {
			t.Errorf("%s: parallel transcript differs (-sequential +parallel):\n%s", scs[i].Name, d)
		}
	}
}

const greetingScenario = `name: hello
steps:
  - say: Hi
    llm:
      - call:
          analyze_user_request: {intent_type: direct_answer, confidence: 0.9, user_request_summary: hi, reasoning: hi, direct_response: Hello there!}
    expect: {status: completed, llm_calls: 1}
`

func TestGoldenMissingUpdateAndDiff(t *testing.T) {
	dir := t.TempDir()
	sc := parse(t, dir, "hello.yaml", "golden: true\n"+greetingScenario)
	golden := filepath.Join(dir, "golden")
	opts := RunOptions{GoldenDir: golden}

	rep := mustRun(t, sc, opts)
	if rep.Passed() || !strings.Contains(rep.Failures[0], "does not exist; run with --update") {
		t.Fatalf("missing golden: %v", rep.Failures)
	}
	opts.Update = true
	if rep = mustRun(t, sc, opts); !rep.Passed() || !rep.GoldenUpdated {
		t.Fatalf("update: %v", rep.Failures)
	}
	opts.Update = false
	if rep = mustRun(t, sc, opts); !rep.Passed() || rep.GoldenUpdated {
		t.Fatalf("unchanged run: %v", rep.Failures)
	}
	path := filepath.Join(golden, "hello.txt")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "Hello there!", "Hello world!", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = mustRun(t, sc, opts)
	if rep.Passed() || !strings.Contains(rep.Failures[0], "differs from") {
		t.Fatalf("changed golden: %v", rep.Failures)
	}
	for _, want := range []string{"-  Hello world!", "+  Hello there!", "@@"} {
		if !strings.Contains(rep.GoldenDiff, want) {
			t.Errorf("diff lacks %q:\n%s", want, rep.GoldenDiff)
		}
	}
}

// TestBackendURL runs against a server the scenario does not start, as a
// user testing their own deployment would; users cannot be checked there.
func TestBackendURL(t *testing.T) {
	srv, err := sim.Start(sim.Options{Seed: 1, Token: "deployment-token-123"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	sc := parse(t, dir, "url.yaml", `name: url
backend: url
golden: false
setup:
  experiments:
    - {name: Deployed, context: assign-prog, conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], decision_points: [{site: SelectSection, target: absolute_value_plot_equality}]}
steps:
  - say: Is Deployed there?
    llm:
      - call:
          analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: find Deployed, reasoning: lookup}
      - call:
          find_experiment: {name: Deployed}
      - reply: found
      - reply: Yes, Deployed exists.
    expect:
      status: completed
      backend: {experiments: [{name: Deployed, status: inactive}], users: [{id: nobody}]}
`)
	if _, err := Run(context.Background(), sc, RunOptions{}); err == nil || !IsUsage(err) {
		t.Fatalf("backend url without a URL: %v", err)
	}
	rep := mustRun(t, sc, RunOptions{UpgradeURL: srv.URL(), UpgradeToken: "deployment-token-123"})
	want := []string{`step 1 (say "Is Deployed there?"): backend.users: only the embedded simulator can list users (backend: sim)`}
	if d := cmp.Diff(want, rep.Failures); d != "" {
		t.Fatalf("failures (-want +got):\n%s", d)
	}
	if len(srv.Sim().Experiments()) != 1 {
		t.Fatal("setup did not reach the configured server")
	}
	if strings.Contains(rep.Transcript, "deployment-token-123") || !strings.Contains(rep.Transcript, "llm calls: 4") {
		t.Fatalf("transcript:\n%s", rep.Transcript)
	}
}

// TestRecordThenReplay records a run against a stand-in for a live
// endpoint, then replays the cassette with no endpoint at all.
func TestRecordThenReplay(t *testing.T) {
	live := llmtest.NewServer(t)
	live.Enqueue(llmtest.CallReply(llmtest.NewCall("analyze_user_request", map[string]any{
		"intent_type": "direct_answer", "confidence": 0.9, "user_request_summary": "hi", "reasoning": "hi", "direct_response": "Hello from the cassette!"})))
	dir := t.TempDir()
	body := strings.Replace(greetingScenario, "name: hello\n", "name: hello\ngolden: false\nllm: MODE:cassettes/hello.json\n", 1)
	if err := os.MkdirAll(filepath.Join(dir, "cassettes"), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := parse(t, dir, "rec.yaml", strings.Replace(body, "MODE", "record", 1))
	rep := mustRun(t, rec, RunOptions{LLMOptions: llm.Options{BaseURL: live.URL(), APIKey: "sk-live-key-for-the-test-0001"}})
	if !rep.Passed() {
		t.Fatalf("record: %v", rep.Failures)
	}
	cassette, err := os.ReadFile(filepath.Join(dir, "cassettes", "hello.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cassette), "sk-live-key-for-the-test-0001") {
		t.Fatal("the API key reached the cassette")
	}
	rep = mustRun(t, parse(t, dir, "replay.yaml", strings.Replace(body, "MODE", "replay", 1)), RunOptions{})
	if !rep.Passed() || !strings.Contains(rep.Transcript, "Hello from the cassette!") {
		t.Fatalf("replay: %v\n%s", rep.Failures, rep.Transcript)
	}
	if n := len(live.Requests()); n != 1 {
		t.Fatalf("the live endpoint got %d requests; replay must not call it", n)
	}
}

func TestLiveWithoutClientIsUsage(t *testing.T) {
	sc := parse(t, t.TempDir(), "live.yaml", strings.Replace(greetingScenario, "name: hello\n", "name: hello\nllm: live\n", 1))
	rep, err := Run(context.Background(), sc, RunOptions{})
	if err == nil || !IsUsage(err) || rep.Passed() {
		t.Fatalf("err = %v, failures %v", err, rep.Failures)
	}
	if !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("the error does not say what to set: %v", err)
	}
}

func TestJUnit(t *testing.T) {
	reports := []*Report{
		{Name: "ok", File: "scenarios/ok.yaml", Transcript: "# ok\n"},
		{Name: "bad", File: "scenarios/bad.yaml", Failures: []string{`step 1 (say "x"): status: expected a, got b`}, GoldenDiff: "--- a\n+++ b\n"},
	}
	var b strings.Builder
	if err := WriteJUnit(&b, reports, 0); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b.String())
	}
	if doc.Tests != 2 || doc.Failures != 1 || len(doc.Suites[0].Cases) != 2 {
		t.Fatalf("counts: %+v", doc)
	}
	f := doc.Suites[0].Cases[1].Failure
	if f == nil || f.Message != `step 1 (say "x"): status: expected a, got b` || !strings.Contains(f.Body, "+++ b") {
		t.Fatalf("failure: %+v", f)
	}
}

func TestSummary(t *testing.T) {
	r := &Report{Name: "x", LLMCalls: 1}
	if !regexp.MustCompile(`^PASS x \(0\.0s, 1 LLM call\)$`).MatchString(r.Summary()) {
		t.Errorf("summary %q", r.Summary())
	}
}

func TestCheckReferencedFiles(t *testing.T) {
	dir := t.TempDir()
	bad := parse(t, dir, "bad.yaml", "name: bad\nllm: replay:missing.json\noptions: {output_schema: nope.json}\nsteps:\n  - say: hi\n")
	err := Check(bad)
	if err == nil || !strings.Contains(err.Error(), "options.output_schema") || !IsUsage(err) {
		t.Fatalf("Check = %v", err)
	}
	bad.Options.OutputSchema = ""
	if err := Check(bad); err == nil || !strings.Contains(err.Error(), "cassette") {
		t.Fatalf("Check = %v", err)
	}
	good := load(t, filepath.Join(repoRoot(t), "scenarios", "structured-output-on.yaml"))
	if err := Check(good); err != nil {
		t.Fatal(err)
	}
}
