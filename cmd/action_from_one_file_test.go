//go:build unix

package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Two actions that exist only in this file. Nothing else in the module
// names them: everything the agent does with them (the gatherer's prompt
// and tools, validation, the confirmation, execution, the report, the job
// runner in a detached worker) comes from these two registrations.

const (
	oneFileNote actions.Name = "one_file_note"
	oneFileSum  actions.Name = "one_file_sum"
)

// noteParams: write a note for a user, by initialising the user with the
// note as a group (one UpGrade call, counted by the test).
type noteParams struct {
	UserID string `json:"user_id" jsonschema:"the user the note is for"`
	Note   string `json:"note" jsonschema:"the note's text"`
	Times  int    `json:"times,omitempty" jsonschema:"how often the note is meant (1..5, default 1)"`
}

type noteResult struct {
	UserID string `json:"user_id"`
	Note   string `json:"note"`
	Times  int    `json:"times"`
}

// sumParams: add up 1..upto in a job, a batch at a time.
type sumParams struct {
	Upto int `json:"upto" jsonschema:"the last number to add (1..1000)"`
}

type sumTally struct {
	Done int `json:"done"`
	Sum  int `json:"sum"`
}

type sumResult struct {
	Upto    int `json:"upto"`
	Sum     int `json:"sum"`
	Batches int `json:"batches"` // batches this run did (a resumed run does fewer)
}

func init() {
	actions.Register(actions.Def[noteParams]{
		Name: oneFileNote, Order: 1000,
		Description: "Write a note for a user.",
		Note:        "writes a note for a user",
		Canonical: func(p noteParams) noteParams {
			p.UserID, p.Note = strings.TrimSpace(p.UserID), strings.TrimSpace(p.Note)
			if p.Times == 0 {
				p.Times = 1
			}
			return p
		},
		Validate: func(c *actions.Checker, p noteParams) error {
			if p.UserID == "" {
				c.Missing("user_id", "user_id is required")
			}
			if p.Note == "" {
				c.Missing("note", "note is required")
			}
			if p.Times < 1 || p.Times > 5 {
				c.AddValue("times", p.Times, "times must be between 1 and 5")
			}
			return nil
		},
		Plan: func(pl *actions.Planner, p noteParams) error {
			pl.Line("Write the note %q for user %q (meant %d times).", p.Note, p.UserID, p.Times)
			return nil
		},
		Execute: func(ctx context.Context, env actions.Env, p noteParams, _ string) (actions.Outcome, error) {
			if _, err := env.API.Init(ctx, p.UserID, upgrade.InitRequest{Group: map[string][]string{"note": {p.Note}}}); err != nil {
				return actions.Outcome{}, err
			}
			return actions.Result(noteResult(p))
		},
		Reconcile: func(context.Context, actions.Env, noteParams, string, time.Time) (actions.Reconciliation, error) {
			return actions.Reconciliation{Outcome: actions.OutcomeRepeat, Note: "writing the note again changes nothing"}, nil
		},
		Report: actions.ReportAs(func(r noteResult) string {
			return fmt.Sprintf("Wrote the note %q for user %q.", r.Note, r.UserID)
		}),
	})

	actions.Register(actions.Def[sumParams]{
		Name: oneFileSum, Order: 1001,
		Description: "Add up the numbers 1..upto in a background job.",
		Note:        "a background job",
		Validate: func(c *actions.Checker, p sumParams) error {
			if p.Upto < 1 || p.Upto > 1000 {
				c.AddValue("upto", p.Upto, "upto must be between 1 and 1000")
			}
			return nil
		},
		Plan: func(pl *actions.Planner, p sumParams) error {
			pl.Line("Add up 1..%d in a background job.", p.Upto)
			return nil
		},
		Total: func(p sumParams) int { return p.Upto },
		Run: func(ctx context.Context, run actions.JobRun, p sumParams) (json.RawMessage, error) {
			var t sumTally
			if err := run.StartTally(&t); err != nil {
				return nil, err
			}
			size := run.BatchSize
			if size <= 0 {
				size = 7
			}
			batches := 0
			for t.Done < p.Upto {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				for i := 0; i < size && t.Done < p.Upto; i++ {
					t.Done++
					t.Sum += t.Done
				}
				batches++
				if err := run.CommitTally(t.Done, t); err != nil {
					return nil, err
				}
			}
			return json.Marshal(sumResult{Upto: p.Upto, Sum: t.Sum, Batches: batches})
		},
		Report: actions.ReportAs(func(r sumResult) string {
			return fmt.Sprintf("1 + ... + %d = %d.", r.Upto, r.Sum)
		}),
	})
}

// TestActionFromOneFile: an action registered from one file goes through
// the CLI end to end with a scripted LLM over real HTTP: offered to the
// gatherer (listed in its prompt, get_one_file_note_schema, the enum of
// set_action_needed), validated (a missing note is named), shown with its
// rendered plan (exit 10), approved with resume --answer yes, executed once
// and reported in its own words. A second one runs as a job in a detached
// worker: exit 11, resume --wait, the exact result.
func TestActionFromOneFile(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	_, tp, _ := simTap(t, 1)
	ls := llmtest.NewServer(nil)
	t.Cleanup(ls.Close)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+tp.URL()+"/api", "OPENAI_API_KEY=sk-one-file-test-0123456789")
	llmArgs := []string{"--llm", "openai", "--llm-base-url", ls.URL(), "--model", "m"}
	analyze := func(summary string) llmtest.Reply {
		return llmtest.CallReply(llmtest.NewCall("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.95,
			"user_request_summary": summary, "reasoning": "an action", "needs_action": true}))
	}
	// The reply that shows a confirmation may be worded by the model; a
	// reply left unused is harmless, as the queue is reset at every step.
	responder := llmtest.TextReply("Here is what I am about to do.")

	// ---- the note: proposed, validated, shown ----
	ls.Enqueue(
		analyze("write a note"),
		llmtest.CallReply(llmtest.NewCall("get_one_file_note_schema", nil),
			llmtest.NewCall("set_action_needed", map[string]any{"action": "one_file_note", "reasoning": "asked"})),
		llmtest.CallReply(llmtest.NewCall("set_action_params", map[string]any{"action_params": map[string]any{"user_id": "student-7", "times": "2"}})),
		llmtest.CallReply(llmtest.NewCall("update_action_params", map[string]any{"key": "note", "value": "  bring the worksheet "})),
		// An action built key by key in its turn is asked about once more.
		llmtest.TextReply("The note is ready."),
		responder,
	)
	code, out, errOut := agentIn(t, env, append([]string{"ask", "-o", "json", "write a note for student-7"}, llmArgs...)...)
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
	var gatherer []llmtest.RecordedRequest
	for _, r := range ls.Requests() {
		if r.Node == "gatherer" {
			gatherer = append(gatherer, r)
		}
	}
	if len(gatherer) < 3 {
		t.Fatalf("%d gatherer requests, want at least 3", len(gatherer))
	}
	first := gatherer[0]
	if !slices.Contains(first.Tools, "get_one_file_note_schema") || !slices.Contains(first.Tools, "get_one_file_sum_schema") {
		t.Errorf("the gatherer is not offered the schema tools: %v", first.Tools)
	}
	if !strings.Contains(first.Messages[0].Content, "one_file_note (writes a note for a user), one_file_sum (a background job)") {
		t.Errorf("the gatherer's prompt does not list the actions:\n%s", first.Messages[0].Content)
	}
	if enum := actionEnum(t, first.Body); !slices.Contains(enum, "one_file_note") || !slices.Contains(enum, "create_experiment") {
		t.Errorf("set_action_needed's enum: %v", enum)
	}
	if tr := toolResult(gatherer[1], "get_one_file_note_schema"); !strings.Contains(tr, `"note":{"type":"string","description":"the note's text"}`) ||
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
	code, out, errOut = agentIn(t, env, append([]string{"resume", res.SessionID, "--answer", "yes", "-o", "json"}, llmArgs...)...)
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

	// ---- the job: exit 11, resume --wait, the exact result ----
	ls.Reset()
	ls.Enqueue(
		analyze("add up to 100"),
		llmtest.CallReply(llmtest.NewCall("set_action_needed", map[string]any{"action": "one_file_sum", "reasoning": "asked"}),
			llmtest.NewCall("set_action_params", map[string]any{"action_params": map[string]any{"upto": 100}})),
		responder,
	)
	code, out, errOut = agentIn(t, env, append([]string{"ask", "--yes", "--wait-jobs", "0", "-o", "json", "add up 1 to 100"}, llmArgs...)...)
	if code != 11 {
		t.Fatalf("ask: exit %d, want 11\n%s\n%s", code, out, errOut)
	}
	res = decodeResult(t, out)
	if res.Job == nil || res.Job.Action != string(oneFileSum) || res.Job.State != actions.JobRunning {
		t.Fatalf("job: %+v", res.Job)
	}
	jobID := res.Job.ID
	stopWorkerAtEnd(t, state, jobID)

	ls.Reset()
	ls.Enqueue(llmtest.TextReply("The sum is ready."))
	code, out, errOut = agentIn(t, env, append([]string{"resume", res.SessionID, "--wait", "--timeout", "2m", "-o", "json"}, llmArgs...)...)
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
	code, out, _ = agentIn(t, env, "jobs", "show", jobID)
	if code != 0 || !strings.Contains(out, "1 + ... + 100 = 5050.") || !strings.Contains(out, "Progress:  100/100") {
		t.Errorf("jobs show: exit %d\n%s", code, out)
	}
}

// actionEnum is the enum of set_action_needed's action argument in a
// request body.
func actionEnum(t *testing.T, body []byte) []string {
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
		if tl.Function.Name == "set_action_needed" {
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
