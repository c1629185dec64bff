//go:build unix

package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// mcpStart matches the START of a job-backed tool: a tools/call of the
// tool whose job _meta carries an idempotency key (a FETCH carries the
// job's key instead).
func mcpStart(tool string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		meta, ok := toolCall(r, tool)
		if !ok {
			return false
		}
		var job struct {
			IdempotencyKey string `json:"idempotency_key"`
			Key            string `json:"key"`
		}
		_ = json.Unmarshal(meta[mcptest.MetaKeyJob], &job)
		return job.IdempotencyKey != "" && job.Key == ""
	}
}

// toolCall reports whether r is a tools/call of tool, with its _meta; the
// body stays readable.
func toolCall(r *http.Request, tool string) (map[string]json.RawMessage, bool) {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil, false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string                     `json:"name"`
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err != nil || json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || msg.Params.Name != tool {
		return nil, false
	}
	return msg.Params.Meta, true
}

// mcpSession is a session awaiting the confirmation of an MCP job-backed
// tool (long_report, three polls long), the server in this process over
// streamable HTTP behind a tap.
type mcpSession struct {
	srv   *mcptest.Server
	tp    *tap
	state string
	env   []string
	id    string
	idem  string // the idempotency key the approved confirmation gives the START
	dir   string
}

func newMCPSession(t *testing.T) *mcpSession {
	t.Helper()
	srv, err := mcptest.New(mcptest.Options{Jobs: true, Advertise: true, Polls: 3})
	if err != nil {
		t.Fatal(err)
	}
	ms := &mcpSession{srv: srv, dir: t.TempDir()}
	ms.tp = newTap(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil))
	ms.state = filepath.Join(ms.dir, "state")
	cfg := writeTestFile(t, ms.dir, "config.yaml", fmt.Sprintf("mcp_servers:\n  - name: srv\n    url: %s/mcp\n", ms.tp.URL()))
	ms.env = agentEnv(t, "UPGRADE_AGENT_HOME="+ms.state, "UPGRADE_AGENT_CONFIG="+cfg)
	propose := writeTestFile(t, ms.dir, "propose.yaml", `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: weekly report, reasoning: action}
- call:
    set_action_needed: {action: mcp__srv__long_report, reasoning: asked}
    set_action_params: {action_params: {topic: weekly}}
- reply: I will ask the report server.
`)
	if code, o, e := agentIn(t, ms.env, "ask", "--llm", "script:"+propose, "write the weekly report"); code != 10 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, o, e)
	}
	ms.id = latestSession(t, ms.state)
	ms.idem = mcpclient.IdempotencyKey(loadCheckpoint(t, ms.state, ms.id).CP.Interrupt.ID, "srv", "long_report")
	return ms
}

func (ms *mcpSession) script(t *testing.T, name, yaml string) string {
	return "script:" + writeTestFile(t, ms.dir, name, yaml)
}

// MCP job-backed actions pass the crash script of the balance job: the
// CLI killed when the START arrives, when it was served with the answer
// held, and at times after it; then resume. Exactly one job is started
// (the repeated START carries the same idempotency key and re-attaches),
// a resume with time to wait (--wait-jobs) finishes the job inline, one
// with none suspends with real progress (never "0 of 0"), and resume --wait
// finishes it.
func TestCrashMCPJobStartsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kps := []killPoint{
		{name: "START arrived", at: func(tp *tap) *stop { return tp.stopAt(mcpStart("long_report"), onArrival, 0) }},
		{name: "START served, answer held", at: func(tp *tap) *stop { return tp.stopAt(mcpStart("long_report"), onServed, 0) }},
	}
	for _, d := range spread(soak(2), 10*time.Millisecond) {
		kps = append(kps, killPoint{name: "START arrived + " + d.String(), d: d,
			at: func(tp *tap) *stop { return tp.watchFor(mcpStart("long_report")) }})
	}
	for i, kp := range kps {
		for _, wait := range []bool{true, false} {
			if i > 1 && !wait {
				continue // the time points try the inline wait only
			}
			t.Run(fmt.Sprintf("%s/wait-jobs=%v", kp.name, wait), func(t *testing.T) {
				ms := newMCPSession(t)
				at := kp.at(ms.tp)
				p := startAgent(t, ms.env, "resume", ms.id, "--answer", "yes", "--wait-jobs", "0", "--llm", ms.script(t, "none.yaml", "[]\n"))
				killed := false
				if at.watch {
					killed = p.killAfterHit(t, at, kp.d)
				} else if killed = p.killOn(t, at); !killed {
					t.Fatalf("the run ended before the kill point:\n%s", p.out.String())
				}
				waitUnlocked(t, ms.state, ms.id)
				checkAllCheckpoints(t, ms.state, ms.id)
				done := ms.script(t, "done.yaml", "- reply: The weekly report is ready.\n")

				ic := loadCheckpoint(t, ms.state, ms.id).CP.Interrupt
				switch {
				case !killed || (ic != nil && ic.Kind == checkpoint.KindJob):
					// The run had suspended on the job (its handle is in the
					// checkpoint) before the kill: resume checks it once
					// unless told to wait.
					code, o, e := agentIn(t, ms.env, "resume", ms.id, "--wait", "--timeout", "1m", "-o", "json", "--llm", done)
					if code != 0 {
						t.Fatalf("resume --wait: exit %d\n%s\n%s", code, o, e)
					}
				case wait:
					code, o, e := agentIn(t, ms.env, "resume", ms.id, "--answer", "yes", "--wait-jobs", "30s", "-o", "json", "--llm", done)
					res := decodeResult(t, o)
					if code != 0 || res.Status != pipeline.StatusCompleted || len(res.Actions) != 1 || res.Actions[0].Status != "success" {
						t.Fatalf("resume --wait-jobs 30s after the kill: exit %d\n%s\n%s\nkilled run:\n%s", code, o, e, p.out.String())
					}
				default:
					code, o, e := agentIn(t, ms.env, "resume", ms.id, "--answer", "yes", "--wait-jobs", "0", "-o", "json", "--llm", done)
					res := decodeResult(t, o)
					if code != 11 || res.Job == nil || res.Job.Progress == nil || res.Job.Progress.Total != 3 || strings.Contains(res.Response, "0 of 0") {
						t.Fatalf("resume --wait-jobs 0 after the kill: exit %d, want 11 with progress\n%s\n%s", code, o, e)
					}
					code, o, e = agentIn(t, ms.env, "resume", ms.id, "--wait", "--timeout", "1m", "-o", "json", "--llm", done)
					res = decodeResult(t, o)
					if code != 0 || len(res.Actions) != 1 || res.Actions[0].Status != "success" || !strings.Contains(e, "3/3 succeeded") {
						t.Fatalf("resume --wait: exit %d\n%s\n%s", code, o, e)
					}
				}
				if n := ms.srv.Starts(ms.idem); n != 1 {
					t.Errorf("%d jobs started, want exactly 1 (%d START requests)", n, ms.srv.StartRequests(ms.idem))
				}
				if code, _, e := agentIn(t, ms.env, "resume", ms.id, "--llm", done); code != 2 || !strings.Contains(e, "nothing to resume") {
					t.Errorf("something left to resume: exit %d\n%s", code, e)
				}
				t.Logf("START requests: %d, jobs started: %d", ms.srv.StartRequests(ms.idem), ms.srv.Starts(ms.idem))
			})
		}
	}
}

// toolCalls counts the tools/call requests of one tool that reached the
// handler.
type toolCalls struct {
	h    http.Handler
	tool string
	mu   sync.Mutex
	n    int
}

func (c *toolCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isToolCall(r, c.tool) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	c.h.ServeHTTP(w, r)
}

func (c *toolCalls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func isToolCall(r *http.Request, tool string) bool {
	_, ok := toolCall(r, tool)
	return ok
}

// A tool of a server that runs no jobs cannot be asked whether an
// interrupted call ran. Killed while the call was in flight, the next
// `resume --answer yes` does not call it again blindly: it reports the
// outcome unknown and asks again (exit 10); the answer given before the
// person read that is not the answer to it. Only a yes after that runs it.
func TestCrashMCPPlainToolNotRepeatedBlindly(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv, err := mcptest.New(mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	calls := &toolCalls{h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil), tool: "long_report"}
	tp := newTap(t, calls)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := writeTestFile(t, dir, "config.yaml", fmt.Sprintf("mcp_servers:\n  - name: srv\n    url: %s/mcp\n", tp.URL()))
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_AGENT_CONFIG="+cfg)
	propose := writeTestFile(t, dir, "propose.yaml", `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: weekly report, reasoning: action}
- call:
    set_action_needed: {action: mcp__srv__long_report, reasoning: asked}
    set_action_params: {action_params: {topic: weekly}}
- reply: I will ask the report server.
`)
	done := writeTestFile(t, dir, "done.yaml", "- reply: Done.\n")
	if code, o, e := agentIn(t, env, "ask", "--llm", "script:"+propose, "write the weekly report"); code != 10 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, o, e)
	}
	id := latestSession(t, state)

	at := tp.stopAt(func(r *http.Request) bool { return isToolCall(r, "long_report") }, onServed, 0)
	p := startAgent(t, env, "resume", id, "--answer", "yes", "--llm", "script:"+done)
	if !p.killOn(t, at) {
		t.Fatalf("the run ended before the kill point:\n%s", p.out.String())
	}
	waitUnlocked(t, state, id)

	code, o, e := agentIn(t, env, "resume", id, "--answer", "yes", "-o", "json", "--llm", "script:"+done)
	res := decodeResult(t, o)
	if code != 10 || res.Confirmation == nil || len(res.Actions) != 0 {
		t.Fatalf("resume --answer yes after the kill: exit %d, want 10 (outcome unknown, asked again)\n%s\n%s", code, o, e)
	}
	if n := calls.count(); n != 1 {
		t.Fatalf("the tool was called %d times, want once (never again blindly)", n)
	}
	code, o, e = agentIn(t, env, "resume", id, "--answer", "yes", "-o", "json", "--llm", "script:"+done)
	if code != 0 || calls.count() != 2 {
		t.Fatalf("yes after the outcome was reported: exit %d, %d calls (want 0, 2)\n%s\n%s", code, calls.count(), o, e)
	}
}
