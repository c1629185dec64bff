package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

// A job handle is data from the checkpoint: one altered to name another
// tool (here echo, with arguments of its own) is refused before any call,
// so the FETCH of a finished job cannot run a tool nobody approved.
func TestMCPHandleNamingAnotherToolIsRefused(t *testing.T) {
	h := newHarness(t)
	srv := withMCP(t, h, mcptest.Options{Jobs: true, Advertise: true, Polls: 100})
	proposeReport(h, map[string]any{"topic": "weekly"})
	if res := h.ask("yes"); res.Status != StatusWaitingJob {
		t.Fatalf("got %+v", res)
	}
	if err := srv.Finish(jobKey(t, h)); err != nil {
		t.Fatal(err)
	}

	var hd jobHandle
	var mh mcpclient.JobHandle
	if err := json.Unmarshal(h.sess.cp.Interrupt.Job.Handle, &hd); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(hd.Handle, &mh); err != nil {
		t.Fatal(err)
	}
	mh.Tool, mh.Args = "echo", json.RawMessage(`{"text":"not approved"}`)
	hd.Handle, _ = json.Marshal(mh)
	h.sess.cp.Interrupt.Job.Handle, _ = json.Marshal(hd)
	if err := h.store.Save(h.sess.cp); err != nil {
		t.Fatal(err)
	}
	sess, err := LoadSession(h.store, h.sess.cp.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.agent.Resume(context.Background(), sess, ResumeRequest{})
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("resume with a handle naming echo: %+v, %v; want a refusal", res, err)
	}
	if res != nil && len(res.Actions) > 0 {
		t.Errorf("actions recorded: %+v", res.Actions)
	}
}
