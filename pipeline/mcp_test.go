package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

// withMCP connects the agent to an in-memory test MCP server named "srv".
func withMCP(t *testing.T, h *harness, opts mcptest.Options) *mcptest.Server {
	t.Helper()
	srv, err := mcptest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	m, errs := mcpclient.Connect(context.Background(), []mcpclient.ServerConfig{{Name: "srv", Transport: mcptest.FromSDK(ct)}}, mcpclient.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	t.Cleanup(func() { _ = m.Close() })
	a, err := New(h.agent.deps, h.agent.set, WithMCP(m))
	if err != nil {
		t.Fatal(err)
	}
	h.agent = a
	return srv
}

func proposeReport(h *harness, args map[string]any) *Result {
	return h.ask("write the weekly report",
		analyze(IntentNeedsInfo, "weekly report", nil),
		calls(call("set_action_needed", map[string]any{"action": "mcp__srv__long_report", "reasoning": "asked"}),
			call("set_action_params", map[string]any{"action_params": args})),
		text("I will ask the report server."),
	)
}

func TestMCPReadOnlyToolForGatherer(t *testing.T) {
	h := newHarness(t)
	withMCP(t, h, mcptest.Options{})
	res := h.ask("look up item 7",
		analyze(IntentNeedsInfo, "lookup", nil),
		calls(call("mcp__srv__lookup", map[string]any{"id": "7"})),
		text("done"),
		text("Item 7 is called item 7."),
	)
	if res.Status != StatusCompleted {
		t.Fatalf("got %+v", res)
	}
	reqs := h.llm.Requests()
	offered := strings.Join(reqs[1].Tools, ",")
	if !strings.Contains(offered, "mcp__srv__lookup") || strings.Contains(offered, "mcp__srv__long_report") || strings.Contains(offered, "job_status") {
		t.Fatalf("gatherer tools: %s", offered)
	}
	if last := reqs[3].Messages[len(reqs[3].Messages)-1].Content; !strings.Contains(last, "item 7") {
		t.Fatalf("responder lacks the MCP result: %s", last)
	}
}

func TestMCPJobSuspendsAndResumes(t *testing.T) {
	h := newHarness(t)
	srv := withMCP(t, h, mcptest.Options{Jobs: true, Advertise: true, Polls: 3})
	res := proposeReport(h, map[string]any{"topic": "weekly"})
	if res.Status != StatusAwaitingConfirmation || res.Confirmation.Action != "mcp__srv__long_report" {
		t.Fatalf("got %+v", res)
	}
	res = h.ask("yes")
	if res.Status != StatusWaitingJob || res.Job == nil || res.Usage.LLMCalls != 0 {
		t.Fatalf("got %+v", res)
	}
	if h.sess.cp.Interrupt == nil || h.sess.cp.Interrupt.Kind != checkpoint.KindJob || len(h.sess.cp.MCP) == 0 {
		t.Fatalf("checkpoint lacks the job or the capability: %+v", h.sess.cp)
	}
	key := jobKey(t, h)
	// Still running: one status check, no LLM call.
	r, err := h.agent.Resume(context.Background(), h.sess, ResumeRequest{Wait: 0})
	if err != nil || r.Status != StatusWaitingJob || r.Usage.LLMCalls != 0 {
		t.Fatalf("got %+v, %v", r, err)
	}
	if err := srv.Finish(key); err != nil {
		t.Fatal(err)
	}
	sess, err := LoadSession(h.store, h.sess.cp.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	h.llm.Enqueue(text("The weekly report is ready."))
	r, err = h.agent.Resume(context.Background(), sess, ResumeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusCompleted || len(r.Actions) != 1 || r.Actions[0].Status != "success" || r.Usage.LLMCalls != 1 {
		t.Fatalf("got %+v", r)
	}
	if !strings.Contains(string(r.Actions[0].Result), "weekly") {
		t.Fatalf("result %s", r.Actions[0].Result)
	}
}

func jobKey(t *testing.T, h *harness) string {
	t.Helper()
	var hd jobHandle
	var mh mcpclient.JobHandle
	if err := jsonUnmarshal(h.sess.cp.Interrupt.Job.Handle, &hd); err != nil || jsonUnmarshal(hd.Handle, &mh) != nil || mh.Key == "" {
		t.Fatalf("no MCP handle: %v (%s)", err, h.sess.cp.Interrupt.Job.Handle)
	}
	return mh.Key
}

func TestMCPCrashAfterStartDoesNotStartTwice(t *testing.T) {
	h := newHarness(t)
	srv := withMCP(t, h, mcptest.Options{Jobs: true, Advertise: true, Polls: 100})
	proposeReport(h, map[string]any{"topic": "weekly"})
	// What the executor does before the process dies: the effect is
	// persisted as started, then START reaches the server.
	conf := h.sess.cp.Interrupt.Confirmation
	key := h.sess.cp.Interrupt.ID // the key derives from the approved confirmation
	if err := h.sess.cp.StartEffect("effect-1", conf.Action, conf.ParamsHash, fixedNow()); err != nil {
		t.Fatal(err)
	}
	h.sess.cp.Status = checkpoint.StatusRunning
	if err := h.store.Save(h.sess.cp); err != nil {
		t.Fatal(err)
	}
	if _, err := h.agent.mcp.Call(context.Background(), conf.Action, conf.Params, key); err != nil {
		t.Fatal(err)
	}
	idem := mcpclient.IdempotencyKey(key, "srv", "long_report")
	if srv.Starts(idem) != 1 {
		t.Fatalf("starts = %d", srv.Starts(idem))
	}
	// A new process resumes the session: it re-attaches, never starts a
	// second job.
	res := h.ask("yes")
	if res.Status != StatusWaitingJob {
		t.Fatalf("got %+v", res)
	}
	if srv.Starts(idem) != 1 || srv.StartRequests(idem) != 2 {
		t.Fatalf("starts %d, start requests %d", srv.Starts(idem), srv.StartRequests(idem))
	}
}

func TestMCPPlainServerBlockingPath(t *testing.T) {
	h := newHarness(t)
	withMCP(t, h, mcptest.Options{})
	proposeReport(h, map[string]any{"topic": "weekly"})
	res := h.ask("yes", text("Here is the report."))
	if res.Status != StatusCompleted || len(res.Actions) != 1 || res.Actions[0].Status != "success" {
		t.Fatalf("got %+v", res)
	}
}

func TestMCPFailedJobIsAnError(t *testing.T) {
	h := newHarness(t)
	h.agent.set.WaitJobs = 2e9
	withMCP(t, h, mcptest.Options{Jobs: true, Advertise: true, Polls: 1})
	proposeReport(h, map[string]any{"topic": "weekly", "fail": "disk full"})
	res := h.ask("yes", text("The report failed: disk full."))
	if len(res.Actions) != 1 || res.Actions[0].Status != "error" || !strings.Contains(res.Actions[0].Error, "disk full") {
		t.Fatalf("got %+v", res)
	}
	if len(res.Errors) == 0 || res.Errors[0].Type != ErrTypeAPI {
		t.Fatalf("errors %+v", res.Errors)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestResumeOfATurnKilledAfterItSuspendedWaitsItsWaitJobs: a turn killed
// between its "suspended on a job" save and its last save is left running
// with the job; resume gives it the --wait-jobs wait it never had, instead
// of one check.
func TestResumeOfATurnKilledAfterItSuspendedWaitsItsWaitJobs(t *testing.T) {
	h := newHarness(t)
	withMCP(t, h, mcptest.Options{Jobs: true, Advertise: true, Polls: 3})
	proposeReport(h, map[string]any{"topic": "weekly"})
	if res := h.ask("yes"); res.Status != StatusWaitingJob {
		t.Fatalf("got %+v", res)
	}
	h.sess.cp.Status = checkpoint.StatusRunning // the last save never happened
	if err := h.store.Save(h.sess.cp); err != nil {
		t.Fatal(err)
	}
	sess, err := LoadSession(h.store, h.sess.cp.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	h.agent.set.WaitJobs = time.Minute
	h.llm.Enqueue(text("The weekly report is ready."))
	r, err := h.agent.Resume(context.Background(), sess, ResumeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusCompleted || len(r.Actions) != 1 || r.Actions[0].Status != "success" {
		t.Fatalf("resume checked once instead of waiting --wait-jobs: %+v", r)
	}
}
