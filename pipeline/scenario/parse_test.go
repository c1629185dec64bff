package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
)

// The example of spec/scenarios.md, verbatim apart from the output schema
// path, must parse.
const specExample = `name: delete-then-deny            # unique; names the golden file
description: a denied delete changes nothing and leaves the session clean
backend: sim
seed: 7
llm: script
options:
  confirm: always
  wait_jobs: 0s
  output_schema: schemas/handoff.json
  conversational_outputs: true
setup:
  experiments:
    - name: Math Hints
      context: assign-prog
      status: enrolling
      conditions: [{code: control, weight: 50}, {code: variant, weight: 50}]
      decision_points: [{site: SelectSection, target: absolute_value_plot_equality}]
  users:
    - {id: student1, group: {classId: [c1]}, working_group: {classId: c1}}
steps:
  - say: Delete the Math Hints experiment
    llm:
      - tools_offered: [analyze_user_request]
        call:
          analyze_user_request: {intent_type: needs_info, confidence: 0.95, user_request_summary: delete Math Hints, reasoning: destructive action}
      - call:
          find_experiment: {name: Math Hints}
      - call:
          set_action_needed: {action: delete_experiment, reasoning: user asked}
          set_action_params: {action_params: {experiment_id: "{{experiment:Math Hints}}"}}
      - reply: I am about to delete Math Hints. Reply yes to go ahead.
    expect:
      status: awaiting_confirmation
      exit_code: 10
      trace: [analyzer, gatherer, confirmation, responder]
      confirmation: {action: delete_experiment, destructive: true, message_contains: [Math Hints]}
      response_contains: [Math Hints]
      llm_calls: 4
  - answer: "no"
    llm:
      - reply: Okay, nothing was deleted.
    expect:
      status: completed
      actions: []
      backend:
        experiments: [{name: Math Hints, status: enrolling}]
  - resume: {wait: true}
`

func TestParseSpecExample(t *testing.T) {
	sc, err := Parse([]byte(specExample), filepath.Join("scenarios", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Name, Backend, LLM, Confirm, Schema string
		Seed                                int64
		WaitJobs                            time.Duration
		Conv, Golden                        bool
		Kinds                               []string
		Replies                             []int
		Users                               int
		Status                              string
	}{Name: sc.Name, Backend: sc.Backend, LLM: sc.LLM.String(), Confirm: sc.Options.Confirm, Schema: sc.Options.OutputSchema,
		Seed: sc.Seed, WaitJobs: sc.Options.WaitJobs, Conv: sc.Options.ConversationalOutputs, Golden: sc.Golden,
		Users: len(sc.Setup.Users), Status: sc.Setup.Experiments[0].Status}
	for _, st := range sc.Steps {
		got.Kinds = append(got.Kinds, st.Kind)
		got.Replies = append(got.Replies, len(st.LLM))
	}
	want := got
	want.Name, want.Backend, want.LLM, want.Confirm, want.Schema = "delete-then-deny", "sim", "script", "always", "schemas/handoff.json"
	want.Seed, want.WaitJobs, want.Conv, want.Golden = 7, 0, true, true
	want.Kinds, want.Replies, want.Users, want.Status = []string{"say", "answer", "resume"}, []int{4, 1, 0}, 1, "enrolling"
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("parsed scenario (-want +got):\n%s", d)
	}
	st := sc.Steps[0]
	if st.LLM[3].Source != "example.yaml:31" {
		t.Errorf("reply source = %q, want example.yaml:31", st.LLM[3].Source)
	}
	if c := st.LLM[2].Calls; len(c) != 2 || c[0].Name != "set_action_needed" || c[1].Name != "set_action_params" {
		t.Errorf("parallel calls = %+v", c)
	}
	if *st.Expect.ExitCode != 10 || *st.Expect.LLMCalls != 4 || !*st.Expect.Confirmation.Destructive {
		t.Errorf("expectations = %+v", st.Expect)
	}
	if !sc.Steps[2].Resume.Wait {
		t.Error("resume.wait not read")
	}
}

// TestResumeWithoutOptions: `- resume:` (null) is a resume step, not a
// missing key.
func TestResumeWithoutOptions(t *testing.T) {
	sc, err := Parse([]byte("name: x\nsteps:\n  - resume:\n  - resume: {wait: true, timeout: 2m}\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := []ResumeSpec{sc.Steps[0].Resume, sc.Steps[1].Resume}
	want := []ResumeSpec{{}, {Wait: true, Timeout: 2 * time.Minute}}
	if d := cmp.Diff(want, got); d != "" || sc.Steps[0].Kind != StepResume || sc.Steps[0].Line != 3 {
		t.Errorf("resume steps (-want +got):\n%s\n%+v", d, sc.Steps)
	}
}

func TestParseDefaults(t *testing.T) {
	sc, err := Parse([]byte("name: x\nsteps:\n  - say: hi\n"), filepath.Join(t.TempDir(), "x.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Confirm: "always", WaitJobs: DefaultWaitJobs}
	if d := cmp.Diff(want, sc.Options); d != "" {
		t.Errorf("options (-want +got):\n%s", d)
	}
	if sc.Backend != BackendSim || sc.LLM.Mode != LLMScript || sc.Golden || sc.Seed != 1 {
		t.Errorf("defaults: %+v", sc)
	}
}

// TestTypoNamesFileLineAndKey: the typo of testdata/typo.yaml is reported
// with its position and a suggestion.
func TestTypoNamesFileLineAndKey(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "typo.yaml"))
	if err == nil {
		t.Fatal("a typo'd key was accepted")
	}
	want := `testdata/typo.yaml:6:7: unknown key "stauts" in step 1.expect; did you mean "status"?`
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error = %q\nwant prefix %q", err, want)
	}
	if !errors.Is(err, ErrInvalid) || !IsUsage(err) {
		t.Error("a parse error must be an ErrInvalid (exit 2)")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"no name", "steps:\n  - say: hi\n", "f.yaml:1:1: name is required"},
		{"no steps", "name: x\n", "f.yaml:1:1: steps: at least one step"},
		{"unknown top key", "name: x\nstep:\n  - say: hi\n", `f.yaml:2:1: unknown key "step" in the scenario; did you mean "steps"?`},
		{"bad name", "name: a b\nsteps:\n  - say: hi\n", `f.yaml:1:7: name "a b": use letters`},
		{"two kinds", "name: x\nsteps:\n  - say: hi\n    answer: yes\n", "f.yaml:3:5: step 1: has say and answer"},
		{"no kind", "name: x\nsteps:\n  - expect: {status: completed}\n", "f.yaml:3:5: step 1: needs one of say, answer or resume"},
		{"say not text", "name: x\nsteps:\n  - say: [a]\n", "f.yaml:3:10: step 1.say: want text, got a list"},
		{"bad status", "name: x\nsteps:\n  - say: hi\n    expect: {status: done}\n", `f.yaml:4:22: step 1.expect.status: "done" is not one of completed`},
		{"exit code type", "name: x\nsteps:\n  - say: hi\n    expect: {exit_code: ten}\n", `f.yaml:4:25: step 1.expect.exit_code: want a whole number, got "ten"`},
		{"bad backend", "name: x\nbackend: docker\nsteps:\n  - say: hi\n", `f.yaml:2:10: backend: "docker" is not one of sim, url`},
		{"bad llm", "name: x\nllm: replay\nsteps:\n  - say: hi\n", "f.yaml:2:6: llm: replay needs a cassette file"},
		{"bad duration", "name: x\noptions: {wait_jobs: soon}\nsteps:\n  - say: hi\n", `f.yaml:2:22: options.wait_jobs: want a duration`},
		{"never without yes", "name: x\noptions: {confirm: never}\nsteps:\n  - say: hi\n", "f.yaml:2:10: options.confirm: never needs yes: true"},
		{"reply typo", "name: x\nsteps:\n  - say: hi\n    llm:\n      - replyy: hello\n", `f.yaml:5: step 1.llm: unknown key "replyy" in a scripted reply`},
		{"setup key typo", "name: x\nsetup:\n  experiments:\n    - name: A\n      contxt: assign-prog\nsteps:\n  - say: hi\n", `f.yaml:5:7: unknown key "contxt" in setup.experiments[0]; did you mean "context"?`},
		{"setup wrong type", "name: x\nsetup:\n  experiments:\n    - name: A\n      conditions: [{code: c, weight: heavy}]\nsteps:\n  - say: hi\n", `f.yaml:4:7: setup.experiments[0] (A): conditions[0].weight`},
		{"setup bad state", "name: x\nsetup:\n  experiments:\n    - {name: A, status: sleeping}\nsteps:\n  - say: hi\n", `setup.experiments[0].status: unknown state "sleeping"`},
		{"backend experiment without name", "name: x\nsteps:\n  - say: hi\n    expect: {backend: {experiments: [{status: enrolling}]}}\n", "step 1.expect.backend.experiments[0]: name is required"},
		{"backend experiment typo", "name: x\nsteps:\n  - say: hi\n    expect: {backend: {experiments: [{name: A, stat: enrolling}]}}\n", `unknown key "stat" in step 1.expect.backend.experiments[0]`},
		{"bad regexp", "name: x\nsteps:\n  - say: hi\n    expect: {response_matches: '(('}\n", "is not a valid regular expression"},
		{"duplicate key", "name: x\nname: y\nsteps:\n  - say: hi\n", `f.yaml:2:1: key "name" appears twice in the scenario`},
		{"yaml syntax", "name: x\nsteps: [\n", "f.yaml:"},
		{"auth on url", "name: x\nbackend: url\nsetup: {auth_required: true}\nsteps:\n  - say: hi\n", "setup.auth_required only applies to backend: sim"},
		{"action without name", "name: x\nsteps:\n  - say: hi\n    expect: {actions: [{status: success}]}\n", "step 1.expect.actions[0]: action is required"},
		{"empty", "", "f.yaml: empty file"},
		// Struct decoding (issue 20.7): the strict decoder's errors get
		// their column and place from the tree; enums hint like keys.
		{"enum hint", "name: x\nsteps:\n  - say: hi\n    expect: {job: {state: runing}}\n", `f.yaml:4:27: step 1.expect.job.state: "runing" is not one of queued, running, succeeded, failed, cancelled; did you mean "running"?`},
		{"status hint", "name: x\nsteps:\n  - say: hi\n    expect: {status: complete}\n", `; did you mean "completed"?`},
		{"typo in a list item", "name: x\nsteps:\n  - say: hi\n    expect: {actions: [{action: a, statuss: x}]}\n", `f.yaml:4:36: unknown key "statuss" in step 1.expect.actions[0]; did you mean "status"? (known: action, status, params_subset, result_subset, error_contains)`},
		{"typo through an alias", "name: x\nsteps:\n  - &s {say: hi, sy: 2}\n  - *s\n", `f.yaml:3:18: unknown key "sy" in step 1; did you mean "say"?`},
		{"not a mapping", "name: x\noptions: [a]\nsteps:\n  - say: hi\n", "f.yaml:2:10: options: want a mapping (key: value), got a list"},
		{"not a list", "name: x\nsteps: {say: hi}\n", "f.yaml:2:8: steps: want a list of steps (- say: ...), got a mapping"},
		{"step not a mapping", "name: x\nsteps:\n  - hi\n", `f.yaml:3:5: step 1: want a mapping (key: value), got "hi"`},
		{"null list", "name: x\nsteps:\n  - say: hi\n    expect:\n      actions:\n", "f.yaml:5:15: step 1.expect.actions: want a list ([] for none), got nothing (null)"},
		{"null say", "name: x\nsteps:\n  - say: ~\n", "f.yaml:3:10: step 1.say: want text, got nothing (null)"},
		{"merge key", "name: x\nbase: &b {say: hi}\nsteps:\n  - <<: *b\n", "f.yaml:4:5: YAML merge keys (<<) are not supported"},
		{"key not a word", "name: x\n[a]: b\nsteps:\n  - say: hi\n", "f.yaml:2:1: the scenario: keys must be plain words, got a list"},
		{"key not a word, deeper", "name: x\nsteps:\n  - say: hi\n    expect: {output: {[a]: 1}}\n", "f.yaml:4:23: step 1.expect.output: keys must be plain words, got a list"},
		{"null key", "name: x\n~: y\nsteps:\n  - say: hi\n", "f.yaml:2:1: the scenario: keys must be plain words, got nothing (null)"},
		{"root not a mapping", "- a\n", "f.yaml:1:1: the scenario: want a mapping (key: value), got a list"},
		{"user group", "name: x\nsetup: {users: [{id: a, group: x}]}\nsteps:\n  - say: hi\n", `f.yaml:2:32: setup.users[0].group: want {group type: [ids]}, got "x"`},
		{"backend user without id", "name: x\nsteps:\n  - say: hi\n    expect: {backend: {users: [{group: x}]}}\n", "f.yaml:4:32: step 1.expect.backend.users[0]: id is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "f.yaml")
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.yaml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %q\nwant it to contain %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v is not an ErrInvalid", err)
			}
		})
	}
}

// TestBundledScenariosParse: every file of scenarios/ is valid and the
// names are unique.
func TestBundledScenariosParse(t *testing.T) {
	scs, err := LoadAll([]string{filepath.Join(repoRoot(t), "scenarios")})
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) < 30 {
		t.Fatalf("only %d scenarios under scenarios/", len(scs))
	}
}

func TestLoadAllReportsEveryInvalidFileAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: same\nsteps:\n  - say: hi\n")
	write("b.yml", "name: same\nsteps:\n  - say: hi\n")
	write("c.yaml", "name: c\nstepz: []\n")
	write("notes.txt", "not a scenario")
	_, err := LoadAll([]string{dir})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`name "same" is also used by`, `c.yaml:2:1: unknown key "stepz"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := LoadAll([]string{filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing path: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(specExample))
	for _, dir := range []string{"testdata", filepath.Join("..", "..", "scenarios")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	// Hostile seeds (issue 15.7): alias bombs where the parser expands
	// values, an alias cycle, heavy but legitimate reuse, and a file just
	// past the size limit.
	const head = "name: x\nsteps:\n  - say: hi\n"
	reuse := "name: x\nsetup: {users: [&u {id: a}, *u, *u, *u]}\nsteps:\n  - &s {say: hi}\n  - *s\n"
	for _, s := range []string{
		head + "    expect: {output: " + hostile.AliasBomb(6, 9) + "}\n",
		head + "    llm: [{call: {analyze_user_request: " + hostile.AliasBomb(6, 9) + "}}]\n",
		head + "    expect: {output: " + hostile.AliasBomb(3, 3) + "}\n",
		head + "    expect: {output: &o {a: *o}}\n",
		reuse,
		"name: x\nllm: replay:../../x.json\n" + head[len("name: x\n"):],
		head + "#" + hostile.Huge(1<<20),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse(data, "fuzz.yaml")
		if err == nil && (sc.Name == "" || len(sc.Steps) == 0) {
			t.Fatalf("accepted a scenario without name or steps")
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error is not an ErrInvalid: %v", err)
		}
	})
}
