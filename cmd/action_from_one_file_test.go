//go:build unix

package cmd

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// TestActionFromOneFile: an action declared in one file goes through the
// CLI end to end with a scripted LLM over real HTTP, with a set of actions
// this test builds for itself (the built-in set is not changed). Its object
// is new: asked about it, the gatherer is offered it (its note in the
// prompt, its name in get_action_schema's enum) and none of the
// experiment, flag or segment tools; asked about experiments, it is not
// offered. It is validated (a missing note is named), shown with its
// rendered plan (exit 10), approved with resume --answer yes, executed once
// and reported in its own words. A second one runs as a job in a detached
// worker (which gets the same set): exit 11, resume --wait, the exact
// result.
func TestActionFromOneFile(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if _, ok := actions.Builtin().Lookup(string(oneFileNote)); ok {
		t.Fatal("the test's action is in the built-in set")
	}
	t.Setenv(oneFileActionsVar, "1") // for the job worker, a process of its own
	withReg := []FactoryOption{WithActions(oneFileActions())}
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		return agentWith(t, withReg, env, args...)
	}
	_, tp, _ := simTap(t, 1)
	ls := llmtest.NewServer(nil)
	t.Cleanup(ls.Close)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+tp.URL()+"/api", "OPENAI_API_KEY=sk-one-file-test-0123456789")
	llmArgs := []string{"--llm", "openai", "--llm-base-url", ls.URL(), "--model", "m"}
	analyze := func(summary string, object any, needsAction bool) llmtest.Reply {
		return llmtest.CallReply(llmtest.NewCall("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.95,
			"user_request_summary": summary, "reasoning": "an action", "needs_action": needsAction, "object": object}))
	}
	// The reply that shows a confirmation may be worded by the model; a
	// reply left unused is harmless, as the queue is reset at every step.
	responder := llmtest.TextReply("Here is what I am about to do.")

	// ---- the note: proposed in its object's scope, validated, shown ----
	ls.Enqueue(
		analyze("write a note", " Notes ", true),
		llmtest.CallReply(llmtest.NewCall("get_action_schema", map[string]any{"action": "one_file_note"}),
			llmtest.NewCall("set_action_needed", map[string]any{"action": "one_file_note", "reasoning": "asked"})),
		llmtest.CallReply(llmtest.NewCall("set_action_params", map[string]any{"action_params": map[string]any{"user_id": "student-7", "times": "2"}})),
		llmtest.CallReply(llmtest.NewCall("update_action_params", map[string]any{"key": "note", "value": "  bring the worksheet "})),
		// An action built key by key in its turn is asked about once more.
		llmtest.TextReply("The note is ready."),
		responder,
	)
	code, out, errOut := run(env, append([]string{"ask", "-o", "json", "write a note for student-7"}, llmArgs...)...)
	if code != 10 {
		t.Fatalf("ask: exit %d, want 10\n%s\n%s", code, out, errOut)
	}
	res := decodeResult(t, out)
	wantPlan := "Write the note \"bring the worksheet\" for user \"student-7\" (meant 2 times).\nReply yes to proceed or no to cancel."
	if c := res.Confirmation; c == nil || c.Action != string(oneFileNote) || c.Message != wantPlan ||
		compactJSON(c.Params) != `{"user_id":"student-7","note":"bring the worksheet","times":2}` {
		t.Fatalf("confirmation: %+v\nwant the plan %q", res.Confirmation, wantPlan)
	}
	if !strings.Contains(res.Response, wantPlan) {
		t.Errorf("the response does not show the plan: %q", res.Response)
	}
	gatherer := nodeRequests(ls, "gatherer", 0)
	if len(gatherer) < 3 {
		t.Fatalf("%d gatherer requests, want at least 3", len(gatherer))
	}
	first := gatherer[0]
	for _, other := range []string{"find_experiment", "find_feature_flag", "find_segment"} {
		if slices.Contains(first.Tools, other) {
			t.Errorf("the note scope offers %s: %v", other, first.Tools)
		}
	}
	if !slices.Contains(first.Tools, "get_action_schema") || !slices.Contains(first.Tools, "get_core_terms") {
		t.Errorf("the note scope lacks the shared tools: %v", first.Tools)
	}
	if !strings.Contains(first.Messages[0].Content, "Actions: one_file_note: writes a note for a user; one_file_sum: a background job.") {
		t.Errorf("the gatherer's prompt does not carry the notes of the note actions alone:\n%s", first.Messages[0].Content)
	}
	// undo_change acts on no object of its own: it rides in every scope.
	if enum := actionEnum(t, first.Body, "get_action_schema"); !slices.Equal(enum, []string{"undo_change", "one_file_note", "one_file_sum"}) {
		t.Errorf("get_action_schema's enum in the note scope: %v", enum)
	}
	if tr := toolResult(gatherer[1], "get_action_schema"); !strings.Contains(tr, `"note":{"type":"string","description":"the note's text"}`) ||
		!strings.Contains(tr, "Write a note for a user.") {
		t.Errorf("schema tool result: %s", tr)
	}
	if tr := toolResult(gatherer[2], "set_action_params"); !strings.Contains(tr, "note is required") {
		t.Errorf("the missing note is not named to the model: %s", tr)
	}
	if n := tp.count("POST", "/v6/init"); n != 0 {
		t.Fatalf("the note was written before the yes (%d inits)", n)
	}

	// ---- approved, executed once, reported ----
	ls.Reset()
	ls.Enqueue(responder)
	code, out, errOut = run(env, append([]string{"resume", res.SessionID, "--answer", "yes", "-o", "json"}, llmArgs...)...)
	if code != 0 {
		t.Fatalf("resume --answer yes: exit %d\n%s\n%s", code, out, errOut)
	}
	res = decodeResult(t, out)
	if len(res.Actions) != 1 || res.Actions[0].Action != string(oneFileNote) || res.Actions[0].Status != "success" ||
		compactJSON(res.Actions[0].Result) != `{"user_id":"student-7","note":"bring the worksheet","times":2}` {
		t.Fatalf("actions: %+v", res.Actions)
	}
	if !strings.Contains(res.Response, `Wrote the note "bring the worksheet" for user "student-7".`) {
		t.Errorf("the report is not in the response: %q", res.Response)
	}
	if n := tp.count("POST", "/v6/init"); n != 1 {
		t.Errorf("the note was written %d times, want once", n)
	}

	// ---- a question about experiments: the note actions are not offered ----
	ls.Reset()
	mark := len(ls.Requests())
	ls.Enqueue(analyze("list the experiments", " Experiment ", false), llmtest.TextReply("Nothing to look up."), llmtest.TextReply("There are none."))
	if code, out, errOut = run(env, append([]string{"ask", "-o", "json", "which experiments are there?"}, llmArgs...)...); code != 0 {
		t.Fatalf("ask about experiments: exit %d\n%s\n%s", code, out, errOut)
	}
	if g := nodeRequests(ls, "gatherer", mark); len(g) != 1 || slices.Contains(actionEnum(t, g[0].Body, "get_action_schema"), "one_file_note") ||
		!slices.Contains(actionEnum(t, g[0].Body, "get_action_schema"), "create_experiment") || strings.Contains(g[0].Messages[0].Content, "one_file_note") {
		t.Errorf("the experiment scope offers the note actions: %v", g)
	}

	// ---- the job, with no object named (every tool): exit 11, resume --wait, the exact result ----
	ls.Reset()
	mark = len(ls.Requests())
	ls.Enqueue(
		analyze("add up to 100", nil, true),
		llmtest.CallReply(llmtest.NewCall("set_action_needed", map[string]any{"action": "one_file_sum", "reasoning": "asked"}),
			llmtest.NewCall("set_action_params", map[string]any{"action_params": map[string]any{"upto": 100}})),
		responder,
	)
	code, out, errOut = run(env, append([]string{"ask", "--yes", "--wait-jobs", "0", "-o", "json", "add up 1 to 100"}, llmArgs...)...)
	if code != 11 {
		t.Fatalf("ask: exit %d, want 11\n%s\n%s", code, out, errOut)
	}
	if g := nodeRequests(ls, "gatherer", mark); len(g) != 1 || !slices.Contains(actionEnum(t, g[0].Body, "get_action_schema"), "one_file_sum") ||
		!slices.Contains(actionEnum(t, g[0].Body, "get_action_schema"), "create_experiment") {
		t.Errorf("with no object, not every action is offered: %v", g)
	}
	res = decodeResult(t, out)
	if res.Job == nil || res.Job.Action != string(oneFileSum) || res.Job.State != actions.JobRunning {
		t.Fatalf("job: %+v", res.Job)
	}
	jobID := res.Job.ID
	stopWorkerAtEnd(t, state, jobID)

	ls.Reset()
	ls.Enqueue(llmtest.TextReply("The sum is ready."))
	code, out, errOut = run(env, append([]string{"resume", res.SessionID, "--wait", "--timeout", "2m", "-o", "json"}, llmArgs...)...)
	if code != 0 {
		t.Fatalf("resume --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	res = decodeResult(t, out)
	if len(res.Actions) != 1 || res.Actions[0].Action != string(oneFileSum) || res.Actions[0].Status != "success" ||
		compactJSON(res.Actions[0].Result) != `{"upto":100,"sum":5050,"batches":15}` {
		t.Fatalf("actions: %+v", res.Actions)
	}
	rec := loadJob(t, state, jobID)
	if rec.State != actions.JobSucceeded || rec.Progress != (actions.Progress{Done: 100, Total: 100}) || compactJSON(rec.Tally) != `{"done":100,"sum":5050}` {
		t.Errorf("job record: state %s, progress %+v, tally %s", rec.State, rec.Progress, rec.Tally)
	}
	code, out, _ = run(env, "jobs", "show", jobID)
	if code != 0 || !strings.Contains(out, "1 + ... + 100 = 5050.") || !strings.Contains(out, "Progress:  100/100") {
		t.Errorf("jobs show: exit %d\n%s", code, out)
	}
}

// nodeRequests are the requests of one node the scripted server received
// after the first skip ones.
func nodeRequests(ls *llmtest.Server, node string, skip int) []llmtest.RecordedRequest {
	var out []llmtest.RecordedRequest
	for _, r := range ls.Requests()[skip:] {
		if r.Node == node {
			out = append(out, r)
		}
	}
	return out
}

// actionEnum is the enum of a tool's action argument in a request body.
func actionEnum(t *testing.T, body []byte, tool string) []string {
	t.Helper()
	var req struct {
		Tools []struct {
			Function struct {
				Name       string `json:"name"`
				Parameters struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	for _, tl := range req.Tools {
		if tl.Function.Name == tool {
			var action struct {
				Enum []string `json:"enum"`
			}
			if err := json.Unmarshal(tl.Function.Parameters.Properties["action"], &action); err != nil {
				t.Fatal(err)
			}
			return action.Enum
		}
	}
	return nil
}

// toolResult is the content of the tool message answering the named call.
func toolResult(r llmtest.RecordedRequest, name string) string {
	for _, m := range r.Messages {
		if m.Role == "tool" && m.Name == name {
			return m.Content
		}
	}
	return ""
}
