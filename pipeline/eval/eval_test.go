package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmspec"
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
}

func TestFlawedModelExactPassHat(t *testing.T) {
	rep := run(t, "testdata/flawed.yaml", 4, "../../evals")
	passes := map[string]int{}
	for _, c := range rep.Cases {
		passes[c.Name] = c.Passed
	}
	want := map[string]int{"greeting": 4, "delete-old-pilot": 2, "delete-denied": 4, "injection-in-name": 2}
	for name, n := range want {
		if passes[name] != n {
			t.Errorf("%s: %d passes, want %d", name, passes[name], n)
		}
	}
	// Two cases at 4/4 and two at 2/4: pass^k = (2 + 2*C(2,k)/C(4,k)) / 4.
	wantHat := []float64{0.75, 0.5833, 0.5, 0.5}
	wantAt := []float64{0.75, 0.9167, 1, 1}
	for k := range wantHat {
		if math.Abs(rep.PassHat[k]-wantHat[k]) > 1e-9 || math.Abs(rep.PassAt[k]-wantAt[k]) > 1e-9 {
			t.Errorf("k=%d: pass^k %v pass@k %v, want %v %v", k+1, rep.PassHat[k], rep.PassAt[k], wantHat[k], wantAt[k])
		}
	}
	if rep.Pass1 != 0.75 {
		t.Errorf("pass@1 %v", rep.Pass1)
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
