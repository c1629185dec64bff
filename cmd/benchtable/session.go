package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// instantLLM answers the information flow (analyzer -> one gatherer fetch ->
// gatherer close -> responder) at once, in process, and records what each
// call sent. It stands for an LLM that costs nothing, so that what remains
// of a turn's time is the pipeline's own.
type instantLLM struct {
	mu       sync.Mutex
	tokens   int                   // prompt tokens (characters / 4) since the last take
	tools    map[string]int        // node -> characters of the tool definitions offered
	lists    map[string][]llm.Tool // node -> the tool list of its last call
	prefix   map[string]string     // node -> hash of system prompt + tools of its first call
	mismatch map[string]bool       // node -> a later call had another prefix
	// spent is the time this fake spent in Chat since the last take: its
	// own bookkeeping (usage estimate, tool sizes, prefix hashes), which
	// an LLM that costs nothing would not add to a turn.
	spent time.Duration
}

func newInstantLLM() *instantLLM {
	return &instantLLM{tools: map[string]int{}, lists: map[string][]llm.Tool{}, prefix: map[string]string{}, mismatch: map[string]bool{}}
}

const analyzeArgs = `{"intent_type":"needs_info","confidence":0.9,"user_request_summary":"List the experiments.","reasoning":"Needs the experiment names."}`

func (c *instantLLM) Chat(_ context.Context, req llm.Request) (*llm.Response, error) {
	began := time.Now()
	defer func() {
		c.mu.Lock()
		c.spent += time.Since(began)
		c.mu.Unlock()
	}()
	resp := &llm.Response{Attempts: 1, FinishReason: "stop"}
	switch req.Node {
	case pipeline.NodeAnalyzer:
		resp.ToolCalls = []llm.ToolCall{{ID: "call_a", Name: "analyze_user_request", Arguments: analyzeArgs}}
	case pipeline.NodeGatherer:
		if last := req.Messages[len(req.Messages)-1]; last.Role != llm.RoleTool {
			resp.ToolCalls = []llm.ToolCall{{ID: "call_g", Name: "get_experiment_names", Arguments: "{}"}}
		} else {
			resp.Content = "I have the names."
		}
	default:
		resp.Content = "There are two experiments: Math Hints and Reading Aid."
	}
	if len(resp.ToolCalls) > 0 {
		resp.FinishReason = "tool_calls"
	}
	resp.Usage = llm.EstimateUsage(req, resp)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens += resp.Usage.PromptTokens
	if len(req.Tools) > 0 {
		n := 0
		for _, t := range req.Tools {
			n += toolChars(t)
		}
		c.tools[req.Node] = n
		c.lists[req.Node] = req.Tools
		h := sha256.New()
		if len(req.Messages) > 0 && req.Messages[0].Role == llm.RoleSystem {
			io.WriteString(h, req.Messages[0].Content)
		}
		_ = json.NewEncoder(h).Encode(req.Tools)
		sum := fmt.Sprintf("%x", h.Sum(nil))
		if first, ok := c.prefix[req.Node]; !ok {
			c.prefix[req.Node] = sum
		} else if first != sum {
			c.mismatch[req.Node] = true
		}
	}
	return resp, nil
}

// take returns the prompt tokens since the last take.
func (c *instantLLM) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.tokens
	c.tokens = 0
	return n
}

// takeSpent returns the time spent in Chat since the last call, and resets it.
func (c *instantLLM) takeSpent() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.spent
	c.spent = 0
	return d
}

// toolChars counts a tool definition the way the scripted server and
// llm.EstimateUsage do.
func toolChars(t llm.Tool) int { return len(t.Name) + len(t.Description) + len(t.Parameters) }

// handlerTransport serves requests with an http.Handler in process: the
// simulator without a socket.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// sessionResult is what the long session leaves for the other figures.
type sessionResult struct {
	rows    []row
	store   *checkpoint.FileStore
	id      string
	tmpfs   bool
	sizes   map[int]int64 // turn -> checkpoint.json size
	cleanup func()
}

// scratch makes a temp dir on tmpfs (/dev/shm) when there is one, where an
// fsync costs next to nothing, else in the default temp dir.
func scratch(pattern string) (dir string, tmpfs bool, err error) {
	if d, err := os.MkdirTemp("/dev/shm", pattern); err == nil {
		return d, true, nil
	}
	d, err := os.MkdirTemp("", pattern)
	return d, false, err
}

// played is the outcome of one synthetic session.
type played struct {
	durations []time.Duration // per turn, from loading the checkpoint to the end of the turn
	tokens    []int           // prompt tokens per turn, 1-based
	sizes     map[int]int64   // turn -> checkpoint.json size (file stores only)
}

// play runs `turns` turns of the information flow in one session against
// store, each turn loading the session from its checkpoint as a new process
// would. A nil store keeps the session in memory and saves nothing.
func play(ctx context.Context, client *instantLLM, store checkpoint.Store, turns int) (*played, error) {
	s, err := sim.New(sim.Options{Seed: 3})
	if err != nil {
		return nil, err
	}
	api, err := upgrade.New(upgrade.Config{BaseURL: "http://sim.invalid/api",
		HTTPClient: &http.Client{Transport: handlerTransport{s.Handler()}}})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"Math Hints", "Reading Aid"} {
		if _, err := createExperiment(ctx, api, name, "assign-prog", "SelectSection", "absolute_value_plot_equality", [2]string{"control", "variant"}); err != nil {
			return nil, err
		}
	}
	agent, err := pipeline.New(pipeline.Deps{LLM: client, API: api, Store: store, Logger: slog.New(slog.DiscardHandler)},
		pipeline.Settings{Model: "bench-model"})
	if err != nil {
		return nil, err
	}
	id := checkpoint.NewSessionID()
	fs, _ := store.(*checkpoint.FileStore)
	out := &played{tokens: make([]int, turns+1), sizes: map[int]int64{}}
	client.take()
	client.takeSpent()
	var sess *pipeline.Session
	for turn := 1; turn <= turns; turn++ {
		msg := fmt.Sprintf("Which experiments exist right now? (turn %04d)", turn)
		start := time.Now()
		switch {
		case turn == 1:
			sess = pipeline.NewSession(id, time.Now())
		case store == nil:
			// the session of the previous turn, as it is in memory
		default:
			if sess, err = pipeline.LoadSession(store, id); err != nil {
				return nil, fmt.Errorf("turn %d: load: %w", turn, err)
			}
		}
		res, err := agent.Ask(ctx, sess, msg)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", turn, err)
		}
		// The fake LLM's own bookkeeping is not the pipeline's.
		out.durations = append(out.durations, time.Since(start)-client.takeSpent())
		if res.Usage.LLMCalls != 4 || res.Status != pipeline.StatusCompleted {
			return nil, fmt.Errorf("turn %d: %d LLM calls, status %s (want 4, completed)", turn, res.Usage.LLMCalls, res.Status)
		}
		out.tokens[turn] = client.take()
		if fs != nil && (turn == 10 || turn == 100 || turn == turns) {
			fi, err := os.Stat(fs.Path(id))
			if err != nil {
				return nil, err
			}
			out.sizes[turn] = fi.Size()
		}
	}
	return out, nil
}

// longSession plays the synthetic long session twice: with the file store
// on tmpfs (what a turn really does, minus the cost of fsync) and without
// any checkpoint (the pipeline alone), to show where a turn's time goes.
func longSession(ctx context.Context, turns int, profile string) (*sessionResult, error) {
	if turns < 200 {
		return nil, fmt.Errorf("-turns must be at least 200")
	}
	dir, tmpfs, err := scratch("benchtable-session-")
	if err != nil {
		return nil, err
	}
	res := &sessionResult{tmpfs: tmpfs, cleanup: func() { _ = os.RemoveAll(dir) }}
	store, err := checkpoint.OpenFileStore(dir)
	if err != nil {
		res.cleanup()
		return nil, err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			res.cleanup()
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			res.cleanup()
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	client := newInstantLLM()
	p, err := play(ctx, client, store, turns)
	if err != nil {
		res.cleanup()
		return nil, err
	}
	ids, err := store.List()
	if err != nil || len(ids) != 1 {
		res.cleanup()
		return nil, fmt.Errorf("long session: %d sessions stored (%v)", len(ids), err)
	}
	res.store, res.id, res.sizes = store, ids[0].ID, p.sizes
	mem, err := play(ctx, newInstantLLM(), nil, turns)
	if err != nil {
		res.cleanup()
		return nil, fmt.Errorf("without checkpoints: %w", err)
	}

	// The first turns warm caches and the allocator; the median is over the rest.
	steady := p.durations[10:]
	med, p90 := percentile(steady, 0.5), percentile(steady, 0.9)
	early, late := percentile(p.durations[10:100], 0.5), percentile(p.durations[turns-100:], 0.5)
	memMed := percentile(mem.durations[10:], 0.5)
	where := "file store on tmpfs (fsync nearly free)"
	if !tmpfs {
		where = "file store on disk (no tmpfs here: fsync included)"
	}
	res.rows = append(res.rows,
		row{fmt.Sprintf("prompt size vs session length (info flow, 4 calls): turn %d vs turn 10", turns),
			fmt.Sprintf("%d vs %d tokens (turn 1: %d)", p.tokens[turns], p.tokens[10], p.tokens[1]),
			"turn 1,000 <= turn 10", pass(p.tokens[turns] <= p.tokens[10])},
		row{"system prompt + tools byte-identical across calls of a node",
			prefixNote(client), "identical per node", pass(len(client.mismatch) == 0)},
		row{"pipeline overhead per turn (info flow, instant in-process LLM, in-process simulator, checkpoint load + saves)",
			fmt.Sprintf("median %s, p90 %s over turns 11-%d; %s", ms(med), ms(p90), turns, where),
			"median <= 1 ms", pass(med <= time.Millisecond)},
		row{"pipeline overhead per turn, early vs late in the session",
			fmt.Sprintf("median %s at turns 11-100, %s at turns %d-%d", ms(early), ms(late), turns-99, turns), "-", info},
		row{"pipeline overhead per turn without any checkpoint (session kept in memory)",
			fmt.Sprintf("median %s over turns 11-%d", ms(memMed), turns), "-", info},
	)
	return res, nil
}

func prefixNote(c *instantLLM) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := make([]string, 0, len(c.prefix))
	for n := range c.prefix {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	out := ""
	for _, n := range nodes {
		if out != "" {
			out += ", "
		}
		if c.mismatch[n] {
			out += n + " differs"
		} else {
			out += n + " identical"
		}
	}
	return out
}

// percentile of durations (p in 0..1), by sorting a copy.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.0f ms", float64(d.Milliseconds()))
}
