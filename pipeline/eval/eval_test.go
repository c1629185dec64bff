package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmspec"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/eval"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
)

func run(t *testing.T, script string, trials int, paths ...string) *eval.Report {
	t.Helper()
	cases, err := scenario.LoadCases(paths)
	if err != nil {
		t.Fatal(err)
	}
	s, err := llmspec.OpenEvalScript(script, llm.Options{Model: "script"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eval.Run(context.Background(), cases, eval.Options{Trials: trials, Parallel: 2, Model: s.Client, PriceIn: 1, PriceOut: 2})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestBundledSuitePerfectModel(t *testing.T) {
	rep := run(t, "testdata/perfect.yaml", 2, "../../evals")
	for _, c := range rep.Cases {
		for _, tr := range c.Trials {
			if !tr.Passed {
				t.Errorf("%s trial %d: %s", c.Name, tr.Trial, tr.Reason)
			}
		}
	}
	if rep.Pass1 != 1 || rep.PassHat[1] != 1 || rep.ForbiddenEvents != 0 || rep.UnapprovedWrite != 0 {
		t.Errorf("pass@1 %v pass^2 %v forbidden %d unapproved %d", rep.Pass1, rep.PassHat[1], rep.ForbiddenEvents, rep.UnapprovedWrite)
	}
	if rep.LLMCalls == 0 || rep.PromptTokens == 0 || rep.CostUSD == nil || *rep.CostUSD <= 0 {
		t.Errorf("usage %+v cost %v", rep.Usage, rep.CostUSD)
	}
	if len(rep.Cases) < 30 {
		t.Errorf("the bundled suite has %d cases, want at least 30", len(rep.Cases))
	}
	checkCoverage(t, rep)
}

// notYetCovered lists registered actions and lookups the bundled suite has
// no case for, each with the reason. A new action gets a case in evals/
// and its replies in testdata/perfect.yaml.
var notYetCovered = map[string]bool{}

// checkCoverage: the perfect model's trials, all passed, executed every
// registered action and called every lookup the gatherer is offered.
func checkCoverage(t *testing.T, rep *eval.Report) {
	t.Helper()
	executed, called, lookups := map[string]bool{}, map[string]bool{}, map[string]bool{}
	state := map[string]bool{"get_action_schema": true, "set_action_needed": true, "set_action_params": true,
		"update_action_params": true, "set_missing_params": true, "add_error": true}
	for _, c := range rep.Cases {
		for _, tr := range c.Trials {
			for _, line := range tr.Transcript {
				var m struct {
					Type, Node, Name, Action, Status string
					Tools                            []string
				}
				if err := json.Unmarshal(line, &m); err != nil {
					t.Fatal(err)
				}
				switch {
				case m.Type == "backend_write" && m.Status == "success":
					executed[m.Action] = true
				case m.Type == "tool_call":
					called[m.Name] = true
				case m.Type == "llm_request" && m.Node == "gatherer":
					for _, n := range m.Tools {
						if !state[n] {
							lookups[n] = true
						}
					}
				}
			}
		}
	}
	for _, a := range actions.Builtin().Names() {
		if !executed[string(a)] && !notYetCovered[string(a)] {
			t.Errorf("action %s: no bundled case executes it; add one to evals/", a)
		}
	}
	if len(lookups) == 0 {
		t.Fatal("no gatherer request in the transcripts")
	}
	for n := range lookups {
		if !called[n] && !notYetCovered[n] {
			t.Errorf("lookup %s: no bundled case calls it; add a question to evals/", n)
		}
	}
}

// flawedCases: the bundled cases testdata/flawed.yaml has replies for, so
// that cases added to evals/ later leave the figures below unchanged.
func flawedCases(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/flawed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var script map[string]yaml.Node
	if err := yaml.Unmarshal(data, &script); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for name := range script {
		paths = append(paths, filepath.Join("../../evals", name+".yaml"))
	}
	return paths
}

func TestFlawedModelExactPassHat(t *testing.T) {
	rep := run(t, "testdata/flawed.yaml", 4, flawedCases(t)...)
	// The mistakes of testdata/flawed.yaml (its header says which trials
	// fail and why); every other case passes 4 of 4.
	imperfect := map[string]int{"delete-old-pilot": 2, "injection-in-name": 2, "create-experiment": 2,
		"update-experiment": 3, "start-experiment": 1, "flag-status": 0, "ambiguous-stop": 2,
		"injection-in-flag-name": 3, "changed-mind": 2, "add-query": 2}
	for _, c := range rep.Cases {
		want, ok := imperfect[c.Name]
		if !ok {
			want = 4
		}
		if c.Passed != want {
			t.Errorf("%s: %d passes, want %d", c.Name, c.Passed, want)
		}
	}
	if len(rep.Cases) != 46 {
		t.Fatalf("%d cases: the figures below are worked out for 46", len(rep.Cases))
	}
	// By hand, with n = 4 trials and 46 cases: 36 cases at c = 4, two at
	// c = 3, six at c = 2, one at c = 1, one at c = 0.
	// pass^k = mean of C(c,k)/C(4,k):
	//   k=1: (36 + 2*3/4 + 6*2/4 + 1/4) / 46 = 40.75/46     = 0.8859
	//   k=2: (36 + 2*3/6 + 6*1/6)       / 46 = 38/46        = 0.8261
	//   k=3: (36 + 2*1/4)               / 46 = 36.5/46      = 0.7935
	//   k=4: 36/46                                          = 0.7826
	// pass@k = mean of 1 - C(4-c,k)/C(4,k):
	//   k=1: = pass^1                                       = 0.8859
	//   k=2: (36 + 2*1 + 6*5/6 + 1*3/6) / 46 = 43.5/46      = 0.9457
	//   k=3: (36 + 2 + 6 + 3/4)          / 46 = 44.75/46    = 0.9728
	//   k=4: (36 + 2 + 6 + 1)            / 46 = 45/46       = 0.9783
	// pass@1 (mean over the 184 trials) = (144 + 6 + 12 + 1)/184 = 0.8859.
	wantHat := []float64{0.8859, 0.8261, 0.7935, 0.7826}
	wantAt := []float64{0.8859, 0.9457, 0.9728, 0.9783}
	for k := range wantHat {
		if math.Abs(rep.PassHat[k]-wantHat[k]) > 1e-9 || math.Abs(rep.PassAt[k]-wantAt[k]) > 1e-9 {
			t.Errorf("k=%d: pass^k %v pass@k %v, want %v %v", k+1, rep.PassHat[k], rep.PassAt[k], wantHat[k], wantAt[k])
		}
	}
	if rep.Pass1 != 0.8859 {
		t.Errorf("pass@1 %v", rep.Pass1)
	}
	if rep.ForbiddenEvents != 0 || rep.UnapprovedWrite != 0 {
		t.Errorf("forbidden %d unapproved %d", rep.ForbiddenEvents, rep.UnapprovedWrite)
	}
}

func TestForbiddenEventFailsRightEndState(t *testing.T) {
	rep := run(t, "testdata/look-only-deletes.yaml", 1, "testdata/cases/look-only.yaml")
	tr := rep.Cases[0].Trials[0]
	if tr.Passed || !strings.Contains(tr.Reason, "forbidden event write") {
		t.Fatalf("passed %v reason %q", tr.Passed, tr.Reason)
	}
	if rep.ForbiddenEvents != 1 || rep.UnapprovedWrite != 0 {
		t.Errorf("forbidden %d unapproved %d", rep.ForbiddenEvents, rep.UnapprovedWrite)
	}
}

func TestPassHatAndPassAt(t *testing.T) {
	for _, tc := range []struct {
		c, n, k int
		hat, at float64
	}{
		{3, 3, 3, 1, 1}, {0, 3, 1, 0, 0}, {2, 4, 2, 1.0 / 6, 5.0 / 6}, {1, 4, 1, 0.25, 0.25}, {3, 4, 2, 0.5, 1},
	} {
		if got := eval.PassHat(tc.c, tc.n, tc.k); math.Abs(got-tc.hat) > 1e-12 {
			t.Errorf("PassHat(%d,%d,%d) = %v, want %v", tc.c, tc.n, tc.k, got, tc.hat)
		}
		if got := eval.PassAt(tc.c, tc.n, tc.k); math.Abs(got-tc.at) > 1e-12 {
			t.Errorf("PassAt(%d,%d,%d) = %v, want %v", tc.c, tc.n, tc.k, got, tc.at)
		}
	}
}

func TestBadCaseFileNamesLine(t *testing.T) {
	_, err := scenario.LoadCases([]string{"testdata/bad-case.yaml"})
	if err == nil || !strings.Contains(err.Error(), "bad-case.yaml:4") || !strings.Contains(err.Error(), "answr") {
		t.Fatalf("err = %v", err)
	}
	var pe *scenario.ParseError
	if !errors.As(err, &pe) {
		t.Errorf("not a ParseError: %T", err)
	}
}

func TestOutWritesReportsAndTranscripts(t *testing.T) {
	rep := run(t, "testdata/perfect.yaml", 1, "../../evals/delete-old-pilot.yaml")
	dir := t.TempDir()
	if err := eval.WriteOut(dir, rep); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "transcripts", "delete-old-pilot-1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %s: %v", line, err)
		}
		kinds[m["type"].(string)]++
	}
	if kinds["llm_request"] != 2 || kinds["llm_response"] != 2 || kinds["tool_call"] < 3 || kinds["backend_write"] != 1 {
		t.Errorf("transcript kinds %v", kinds)
	}
	for _, f := range []string{"report.json", "report.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

type deadModel struct{ calls *atomic.Int32 }

func (m deadModel) Chat(context.Context, llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	return nil, &llm.Error{Kind: llm.KindNetwork, Provider: "127.0.0.1:9", Message: "connection refused"}
}

func TestUnreachableModelStopsTheRun(t *testing.T) {
	cases, err := scenario.LoadCases([]string{"../../evals"})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	model := func(string, int) (llm.Client, io.Closer, error) { return deadModel{&calls}, io.NopCloser(nil), nil }
	rep, err := eval.Run(context.Background(), cases, eval.Options{Trials: 3, Model: model})
	if !errors.Is(err, eval.ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
	// One trial played (the analyzer's call and its one corrective retry at
	// most); the other 3*len(cases)-1 were not.
	if n := calls.Load(); n == 0 || n > 2 {
		t.Errorf("%d LLM calls, want the first trial's only", n)
	}
	notPlayed := 0
	for _, c := range rep.Cases {
		for _, tr := range c.Trials {
			if strings.HasPrefix(tr.Reason, "not played") {
				notPlayed++
			}
		}
	}
	if want := 3*len(cases) - 1; notPlayed != want {
		t.Errorf("%d trials not played, want %d", notPlayed, want)
	}
}

// TestTemperatureIsSentAndReported: the temperature of a run reaches the
// wire in every LLM call of every trial, 0 included (go-openai would drop
// it: llm's transport puts it back), and the report names it; without one
// no temperature is sent and the report says null.
func TestTemperatureIsSentAndReported(t *testing.T) {
	cases, err := scenario.LoadCases([]string{"../../evals/greeting.yaml", "../../evals/delete-denied.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("testdata/perfect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var byCase map[string]yaml.Node
	if err := yaml.Unmarshal(script, &byCase); err != nil {
		t.Fatal(err)
	}
	for _, temp := range []*float32{ptr(float32(0)), ptr(float32(0.7)), nil} {
		var mu sync.Mutex
		var servers []*llmtest.Server
		model := func(name string, _ int) (llm.Client, io.Closer, error) {
			n := byCase[name]
			text, err := yaml.Marshal(&n)
			if err != nil {
				return nil, nil, err
			}
			replies, err := llmtest.ParseScript(text, name)
			if err != nil {
				return nil, nil, err
			}
			srv := llmtest.NewServer(t)
			srv.Enqueue(replies...)
			mu.Lock()
			servers = append(servers, srv)
			mu.Unlock()
			c, err := llm.New(llm.Options{BaseURL: srv.URL(), Model: "m"})
			return c, closer(srv.Close), err
		}
		rep, err := eval.Run(context.Background(), cases, eval.Options{Trials: 2, Model: model, Temperature: temp})
		if err != nil || rep.Pass1 != 1 {
			t.Fatalf("temperature %v: pass@1 %v, %v", temp, rep.Pass1, err)
		}
		calls := 0
		for _, srv := range servers {
			for _, req := range srv.Requests() {
				calls++
				var body map[string]any
				if err := json.Unmarshal(req.Body, &body); err != nil {
					t.Fatal(err)
				}
				got, sent := body["temperature"]
				switch {
				case temp == nil && sent:
					t.Errorf("call %d (%s): temperature %v sent, want none", req.Call, req.Node, got)
				case temp != nil && (!sent || math.Abs(got.(float64)-float64(*temp)) > 1e-6):
					t.Errorf("call %d (%s): temperature %v (sent %v), want %v", req.Call, req.Node, got, sent, *temp)
				}
			}
		}
		if calls != rep.LLMCalls || calls == 0 {
			t.Errorf("%d requests on the wire, the report counts %d", calls, rep.LLMCalls)
		}
		var out bytes.Buffer
		if err := eval.WriteJSON(&out, rep); err != nil {
			t.Fatal(err)
		}
		var j struct {
			Info struct {
				Temperature *float64 `json:"temperature"`
			} `json:"info"`
		}
		if err := json.Unmarshal(out.Bytes(), &j); err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		if err := eval.WriteText(&text, rep); err != nil {
			t.Fatal(err)
		}
		want := "temperature default"
		switch {
		case temp == nil && j.Info.Temperature != nil:
			t.Errorf("JSON temperature %v, want null", *j.Info.Temperature)
		case temp != nil && (j.Info.Temperature == nil || *j.Info.Temperature != float64(float32ToDecimal(*temp))):
			t.Errorf("JSON temperature %v, want %v", j.Info.Temperature, *temp)
		}
		if temp != nil {
			want = fmt.Sprintf("temperature %g", float32ToDecimal(*temp))
		}
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, text.String())
		}
	}
}

func ptr[T any](v T) *T { return &v }

// float32ToDecimal is the float64 a person means by a float32 flag value.
func float32ToDecimal(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

type closer func()

func (c closer) Close() error { c(); return nil }

// TestCaseAnswersAndErrors: a turn's answer is one answer or a list, each
// played only when the agent asks; mistakes name file:line:col, and text
// that is not YAML the line from which it stops parsing.
func TestCaseAnswersAndErrors(t *testing.T) {
	c, err := scenario.ParseCase([]byte("name: x\nturns:\n  - say: create it\n    answer: [make it 60/40, yes]\n  - say: hi\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Turns[0].Answers; len(got) != 2 || got[0] != "make it 60/40" || got[1] != "yes" || c.Turns[1].Answers != nil {
		t.Fatalf("answers %q, %q", got, c.Turns[1].Answers)
	}
	var kinds []string
	for _, st := range c.Scenario().Steps {
		kinds = append(kinds, fmt.Sprintf("%s:%v:%v", st.Kind, st.IfAsked, st.NoConfirmation))
	}
	if want := "say:false:false answer:true:false answer:true:false say:false:true"; strings.Join(kinds, " ") != want {
		t.Errorf("steps %v, want %s", kinds, want)
	}
	for _, tc := range []struct{ text, want string }{
		{"name: x\nturns:\n  - say: hi\n    answer: []\n", "x.yaml:4:13: turn 1.answer: an empty list"},
		{"name: x\nturns:\n  - say: hi\n    answer: [yes, {a: b}]\n", "x.yaml:4:19: turn 1.answer[1]: want text"},
		{"name: x\nturns:\n  - say: hi\nexpect:\n  experiments: [{name: a}\nforbid: [write]\n", "x.yaml:5: "},
		{"", "x.yaml: empty file: a case needs"},
		{"- a\n", "x.yaml:1:1: the case: want a mapping"},
	} {
		_, err := scenario.ParseCase([]byte(tc.text), "x.yaml")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s...", tc.text, err, tc.want)
		}
	}
}
