package mcpclient_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

func TestTaskLifecycleOnTheWire(t *testing.T) {
	srv := newServer(t, mcptest.Options{Tasks: true})
	cfg := memConfig(t, srv, "tasks")
	rec := &recordingTransport{inner: cfg.Transport}
	cfg.Transport = rec
	m := connect(t, mcpclient.Options{}, cfg)

	if diff := cmp.Diff(map[string]mcpclient.Capability{"tasks": {Tasks: true}}, m.Capabilities()); diff != "" {
		t.Errorf("Capabilities (-want +got):\n%s", diff)
	}
	tool, _ := m.Tool("mcp__tasks__long_report")
	if tool.TaskSupport != "optional" {
		t.Errorf("long_report TaskSupport = %q, want optional", tool.TaskSupport)
	}

	// Read-only use (no effect id) of an optional task tool: plain call.
	if res := mustCall(t, m, "mcp__tasks__long_report", `{"topic":"q1"}`, ""); res.Job != nil || res.Text != "report on q1: 3 sections" {
		t.Errorf("call without an effect id = %+v, want the blocking result", res)
	}

	res := mustCall(t, m, "mcp__tasks__long_report", `{"topic":"q3","polls":3}`, "effect-1")
	want := &mcpclient.JobHandle{Server: "tasks", Tool: "long_report", Kind: mcpclient.KindTask, Key: "task-1",
		Args: json.RawMessage(`{"topic":"q3","polls":3}`)}
	if diff := cmp.Diff(want, res.Job); diff != "" {
		t.Fatalf("task handle (-want +got):\n%s", diff)
	}
	h := *res.Job
	if st := mustStatus(t, m, h); st.State != mcpclient.StateRunning || st.Message != "1 of 3 polls" {
		t.Errorf("first status = %+v", st)
	}
	if _, err := m.FetchJob(testCtx(t), h); !errors.Is(err, mcpclient.ErrJobNotFinished) {
		t.Errorf("FetchJob of a working task: err = %v, want ErrJobNotFinished", err)
	}
	if st := mustStatus(t, m, h); st.State != mcpclient.StateSucceeded {
		t.Errorf("third poll = %+v, want succeeded", st)
	}
	got := mustFetch(t, m, h)
	wantRes := &mcpclient.CallResult{Text: "report on q3: 3 sections", Structured: json.RawMessage(`{"sections":3,"topic":"q3"}`)}
	if diff := cmp.Diff(wantRes, got); diff != "" {
		t.Errorf("FetchJob (-want +got):\n%s", diff)
	}

	// The 2025-11-25 shapes, as the server saw and sent them.
	sent, recvd := rec.messages(true), rec.messages(false)
	if _, ok := findMessage(sent, `"method":"tools/call"`, `"task":{"ttl":86400000}`); !ok {
		t.Errorf("no task-augmented tools/call was sent:\n%s", strings.Join(sent, "\n"))
	}
	for _, m := range sent {
		if strings.Contains(m, "internal-task") {
			t.Errorf("a private marker leaked onto the wire: %s", m)
		}
	}
	if _, ok := findMessage(recvd, `"result":{"task":{`, `"taskId":"task-1"`, `"status":"working"`); !ok {
		t.Errorf("no CreateTaskResult was received:\n%s", strings.Join(recvd, "\n"))
	}
	for _, method := range []string{"tasks/get", "tasks/result"} {
		if _, ok := findMessage(sent, `"method":"`+method+`"`, `"taskId":"task-1"`); !ok {
			t.Errorf("no %s request was sent", method)
		}
	}
}

func TestFailedTaskIsAnErrorResult(t *testing.T) {
	srv := newServer(t, mcptest.Options{Tasks: true})
	m := connect(t, mcpclient.Options{}, memConfig(t, srv, "tasks"))

	h := mustCall(t, m, "mcp__tasks__long_report", `{"topic":"q3","fail":"quota exceeded","polls":0}`, "effect-1").Job
	if h == nil || h.Kind != mcpclient.KindTask {
		t.Fatalf("handle = %+v, want a task", h)
	}
	if st := mustStatus(t, m, *h); st.State != mcpclient.StateFailed || st.Message != "quota exceeded" {
		t.Errorf("status = %+v", st)
	}
	if diff := cmp.Diff(&mcpclient.CallResult{IsError: true, Text: "quota exceeded"}, mustFetch(t, m, *h)); diff != "" {
		t.Errorf("FetchJob (-want +got):\n%s", diff)
	}

	quiet := mustCall(t, m, "mcp__tasks__long_report", `{"topic":"q3","fail":"quota exceeded","polls":0,"quiet":true}`, "effect-3").Job
	mustStatus(t, m, *quiet)
	if diff := cmp.Diff(&mcpclient.CallResult{IsError: true, Text: "quota exceeded"}, mustFetch(t, m, *quiet)); diff != "" {
		t.Errorf("FetchJob of a quietly failed task (-want +got):\n%s", diff)
	}

	cancelled := mustCall(t, m, "mcp__tasks__long_report", `{"topic":"q4"}`, "effect-2").Job
	if err := srv.Cancel(cancelled.Key); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&mcpclient.CallResult{IsError: true, Text: "cancelled by the operator"}, mustFetch(t, m, *cancelled)); diff != "" {
		t.Errorf("FetchJob of a cancelled task (-want +got):\n%s", diff)
	}
}

func TestTaskContractChoice(t *testing.T) {
	tests := []struct {
		name     string
		opts     mcptest.Options
		effectID string
		wantKind string // "" = blocking result
	}{
		{"required task even for a read-only call", mcptest.Options{Tasks: true, TaskSupport: "required"}, "", mcpclient.KindTask},
		{"meta preferred when both are offered", mcptest.Options{Tasks: true, Jobs: true, Advertise: true}, "effect-1", mcpclient.KindMeta},
		{"required task wins over meta", mcptest.Options{Tasks: true, TaskSupport: "required", Jobs: true, Advertise: true}, "effect-1", mcpclient.KindTask},
		{"optional task, no effect id", mcptest.Options{Tasks: true}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := connect(t, mcpclient.Options{}, memConfig(t, newServer(t, tt.opts), "s"))
			res := mustCall(t, m, "mcp__s__long_report", `{"topic":"q3","polls":0}`, tt.effectID)
			gotKind := ""
			if res.Job != nil {
				gotKind = res.Job.Kind
			}
			if gotKind != tt.wantKind {
				t.Fatalf("job kind = %q, want %q (result %+v)", gotKind, tt.wantKind, res)
			}
			if res.Job == nil {
				return
			}
			for st := mustStatus(t, m, *res.Job); !st.Terminal(); st = mustStatus(t, m, *res.Job) {
			}
			if got := mustFetch(t, m, *res.Job); got.IsError || got.Text != "report on q3: 3 sections" {
				t.Errorf("FetchJob = %+v", got)
			}
		})
	}
}
