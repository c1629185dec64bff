package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// RunOptions configure Run. The zero value runs scripted scenarios against
// fresh simulators and compares golden files next to the scenarios.
type RunOptions struct {
	// Update rewrites golden files instead of comparing them.
	Update bool
	// GoldenDir holds the golden transcripts; "" = see GoldenPath.
	GoldenDir string

	// UpgradeURL and UpgradeToken are the UpGrade of `backend: url`.
	UpgradeURL     string
	UpgradeToken   string
	UpgradeTimeout time.Duration

	// LLM is the client of `llm: live` (the CLI builds it from its flags).
	LLM llm.Client
	// LLMOptions reach the live endpoint for `llm: record:FILE`.
	LLMOptions llm.Options
	// Model is the model name sent with live calls; "" = LLMOptions.Model.
	Model string
	// Temperature is sent with every LLM call; nil = not sent (the
	// provider's default).
	Temperature *float32

	// Jobs builds the job runner; nil = the deterministic in-process
	// runner of this package (a job runs to its end while a turn waits on
	// it, and not at all otherwise).
	Jobs func(api actions.API) pipeline.JobRunner

	// Actions are the agent's actions; nil = the built-in set.
	Actions *actions.Registry

	// StateDir keeps the run's sessions there; "" = a temp dir removed
	// after the run.
	StateDir string
	// KeepState, when not empty, keeps each scenario's state dir in
	// KeepState/<name>/: its sessions, and with the embedded simulator that
	// simulator's data file (sim/data.json), so that a paused scenario can be
	// continued by `upgrade-agent resume` with that folder as state dir. The
	// folder must not exist yet, or be empty. It wins over StateDir.
	KeepState string
	// Timeout bounds one scenario; 0 = 5 minutes.
	Timeout time.Duration
	// Logger receives the agent's logs; nil = discard.
	Logger *slog.Logger
}

// Report is the outcome of one scenario.
type Report struct {
	Name     string
	File     string
	Steps    []StepReport
	Failures []string // readable, one line (or a few) each; empty = passed
	// Err is set when the scenario could not run at all (an LLM that is
	// not configured, a backend that cannot start); it is also in Failures.
	Err error

	Transcript    string // normalised
	GoldenFile    string // "" when golden is off
	GoldenDiff    string // unified diff when the transcript differs
	GoldenUpdated bool
	LLMCalls      int
	Duration      time.Duration
}

// Passed reports whether every step met its expectations and the
// transcript matched.
func (r *Report) Passed() bool { return len(r.Failures) == 0 }

// StepReport is the outcome of one step.
type StepReport struct {
	Index    int // 1-based
	Label    string
	Result   *pipeline.Result
	Err      error
	ExitCode int
	LLMNodes []string // node of each LLM call, in order
	// PromptChars is the size of the prompts the step sent (scripted
	// scenarios only): the JSON of the messages plus the JSON of the tools
	// of each request.
	PromptChars int
	// CallChars is PromptChars request by request, with the node that
	// sent it (scripted scenarios only).
	CallChars []CallChars
	Failures  []string
	// Skipped: an IfAsked answer step that was not played (no
	// confirmation was pending).
	Skipped bool
	// Latency is the wall time of the step's turn.
	Latency time.Duration
}

// CallChars is the prompt size of one LLM request.
type CallChars struct {
	Node  string
	Chars int
	// Tools is the part of Chars that is tool definitions: the compact
	// JSON of the tools the request offered.
	Tools int
}

// toolChars is the compact JSON size of the tools a request offered.
func toolChars(body []byte) int {
	var b struct {
		Tools json.RawMessage `json:"tools"`
	}
	var buf bytes.Buffer
	if json.Unmarshal(body, &b) != nil || len(b.Tools) == 0 || json.Compact(&buf, b.Tools) != nil {
		return 0
	}
	return buf.Len()
}

// FixedTime is the clock of every scenario: step n runs at FixedTime plus n
// minutes, so that history timestamps differ but never vary between runs.
// With RunOptions.KeepState the clock starts from the real time instead
// (keptEpoch), so kept state carries real times; transcripts normalise
// every timestamp, so they are the same either way. It is a function, not
// a variable: a time.Date at package level is a call at init.
func FixedTime() time.Time { return time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC) }

// SessionID is the session id of every scenario run.
const SessionID = "scenario-session"

// simToken is the admin token of a simulator with setup.auth_required. It is
// not a secret: only the setup client holds it, the agent never does.
const simToken = "scenario-admin-token"

type clock struct{ ns atomic.Int64 }

func (c *clock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }

// countingLLM records the node of every call, whatever the client.
type countingLLM struct {
	inner llm.Client
	mu    sync.Mutex
	nodes []string
}

func (c *countingLLM) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	c.mu.Lock()
	node := req.Node
	if node == "" {
		node = "(unnamed)"
	}
	i := len(c.nodes)
	c.nodes = append(c.nodes, node)
	c.mu.Unlock()
	resp, err := c.inner.Chat(ctx, req)
	if err == nil && resp != nil && resp.Attempts > 1 {
		// Retries are part of the story (a 429, a reset): show them.
		c.mu.Lock()
		c.nodes[i] = fmt.Sprintf("%s after %d attempts", node, resp.Attempts)
		c.mu.Unlock()
	}
	return resp, err
}

func (c *countingLLM) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes
	c.nodes = nil
	return n
}

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// run is one scenario in progress.
type run struct {
	sc   *Scenario
	opts RunOptions
	rep  *Report
	clk  *clock
	// epoch is the clock's start: step n runs at epoch plus n minutes.
	epoch time.Time
	admin *upgrade.Client // setup and checks: holds the token when one is needed
	// flagAware: the scenario uses flags or segments, so each step learns
	// their ids for templates and transcripts (flags.go).
	flagAware bool
	agent     *pipeline.Agent
	store     *checkpoint.FileStore
	sim       *sim.Server
	llmS      *llmtest.Server // nil unless llm: script
	// seen counts the requests of llmS measured by earlier steps: the
	// server records every request of the scenario.
	seen  int
	count *countingLLM
	res   *resolver
	norm  *normalizer
	tr    transcript
	sess  *pipeline.Session
	// secrets (the UpGrade token, the LLM key) never reach a transcript.
	secrets []string
	// last is the outcome of the last step played (IfAsked steps reuse it).
	last outcome
}

// Run plays one scenario and reports the outcome. A failed expectation is
// in the Report (err is nil); err is returned only when the scenario could
// not run at all, and is then also recorded in the Report.
func Run(ctx context.Context, sc *Scenario, opts RunOptions) (*Report, error) {
	start := time.Now()
	r := &run{sc: sc, opts: opts, rep: &Report{Name: sc.Name, File: sc.File}, clk: &clock{},
		res: newResolver(), norm: newNormalizer(), epoch: FixedTime()}
	if opts.KeepState != "" {
		r.epoch = keptEpoch(wallClock(), len(sc.Steps))
	}
	r.clk.set(r.epoch)
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cleanup, err := r.prepare(ctx)
	defer cleanup()
	if err != nil {
		r.rep.Err = err
		r.rep.Failures = append(r.rep.Failures, err.Error())
		r.rep.Duration = time.Since(start)
		return r.rep, err
	}
	r.steps(ctx)
	r.finish()
	r.rep.Duration = time.Since(start)
	return r.rep, nil
}

// prepare builds the backend, the LLM, the store and the agent, and applies
// the setup. The returned cleanup is never nil.
func (r *run) prepare(ctx context.Context) (func(), error) {
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	sc := r.sc
	r.tr.header(sc)

	var output *pipeline.OutputConfig
	if p := sc.Options.OutputSchema; p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(sc.File), p)
		}
		schema, err := pipeline.LoadOutputSchema(p)
		if err != nil {
			return cleanup, fmt.Errorf("%s: options.output_schema: %w", sc.File, err)
		}
		output = &pipeline.OutputConfig{Schema: schema, Enabled: sc.Options.ConversationalOutputs}
	}

	// State dir.
	dir := r.opts.StateDir
	simData := ""
	if r.opts.KeepState != "" {
		kept, err := keptStateDir(r.opts.KeepState, sc.Name)
		if err != nil {
			return cleanup, err
		}
		dir, simData = kept, filepath.Join(kept, "sim", "data.json")
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "upgrade-agent-scenario-")
		if err != nil {
			return cleanup, fmt.Errorf("state dir: %w", err)
		}
		closers = append(closers, func() { _ = os.RemoveAll(tmp) })
		dir = tmp
	}
	store, err := checkpoint.OpenFileStore(dir)
	if err != nil {
		return cleanup, err
	}
	store.Now = r.clk.now
	r.store = store

	// Backend.
	var agentAPI *upgrade.Client
	var secrets []string
	switch sc.Backend {
	case BackendURL:
		if r.opts.UpgradeURL == "" {
			return cleanup, fmt.Errorf("%s: backend: url needs an UpGrade URL (--upgrade-url or UPGRADE_API_URL): %w", sc.File, pipeline.ErrBadInput)
		}
		c, err := upgrade.New(upgrade.Config{BaseURL: r.opts.UpgradeURL, Token: r.opts.UpgradeToken, Timeout: r.opts.UpgradeTimeout})
		if err != nil {
			return cleanup, fmt.Errorf("%s: %w", sc.File, err)
		}
		r.admin, agentAPI = c, c
		r.norm.urls = append(r.norm.urls, strings.TrimRight(r.opts.UpgradeURL, "/"))
		store.Server = strings.TrimRight(strings.TrimSpace(r.opts.UpgradeURL), "/")
		if r.opts.UpgradeToken != "" {
			secrets = append(secrets, r.opts.UpgradeToken)
		}
	default:
		token := ""
		if sc.Setup.AuthRequired {
			token = simToken
		}
		srv, err := sim.Start(sim.Options{Seed: sc.Seed, Now: r.clk.now, Token: token, DataFile: simData})
		if err != nil {
			return cleanup, fmt.Errorf("%s: start the simulator: %w", sc.File, err)
		}
		closers = append(closers, func() { _ = srv.Close() })
		if simData != "" {
			// The kept sessions name this simulator, as the CLI's do.
			id, err := srv.Sim().Identity()
			if err != nil {
				return cleanup, fmt.Errorf("%s: %w", sc.File, err)
			}
			store.Server = sim.ServerPrefix + id
		}
		r.sim = srv
		r.norm.urls = append(r.norm.urls, srv.URL())
		if r.admin, err = upgrade.New(upgrade.Config{BaseURL: srv.URL(), Token: token}); err != nil {
			return cleanup, err
		}
		agentAPI = r.admin
		if token != "" {
			// The agent speaks to the same server without the token.
			if agentAPI, err = upgrade.New(upgrade.Config{BaseURL: srv.URL()}); err != nil {
				return cleanup, err
			}
		}
	}

	// LLM.
	var client llm.Client
	model := r.opts.Model
	if model == "" {
		model = r.opts.LLMOptions.Model
	}
	switch sc.LLM.Mode {
	case LLMScript:
		r.llmS = llmtest.NewServer(nil)
		closers = append(closers, r.llmS.Close)
		model = "scenario-model"
		c, err := llm.New(llm.Options{BaseURL: r.llmS.URL(), Model: model, Sleep: noSleep, ProviderName: "scenario script"})
		if err != nil {
			return cleanup, err
		}
		client = c
	case LLMLive:
		if r.opts.LLM == nil {
			return cleanup, fmt.Errorf("%s: llm: live: %w", sc.File, llm.ErrNotConfigured)
		}
		client = r.opts.LLM
	case LLMReplay, LLMRecord:
		path := sc.LLM.File
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(sc.File), path)
		}
		lo := r.opts.LLMOptions
		lo.Model = model
		c, closer, err := llm.FromSpec(sc.LLM.Mode+":"+path, lo)
		if err != nil {
			return cleanup, fmt.Errorf("%s: llm: %w", sc.File, err)
		}
		closers = append(closers, func() {
			if err := closer.Close(); err != nil {
				r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("llm %s: %v", sc.LLM, err))
			}
		})
		client = c
	}
	if r.opts.LLMOptions.APIKey != "" {
		secrets = append(secrets, r.opts.LLMOptions.APIKey)
	}
	store.Secrets = secrets
	r.secrets = secrets
	r.count = &countingLLM{inner: client}

	jobs := pipeline.JobRunner(newStepJobs(agentAPI))
	if r.opts.Jobs != nil {
		jobs = r.opts.Jobs(agentAPI)
	}
	var ids atomic.Int64
	logger := r.opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	agent, err := pipeline.New(pipeline.Deps{
		LLM: r.count, API: agentAPI, Store: store, Jobs: jobs, Actions: r.opts.Actions,
		Now: r.clk.now, NewID: func() string { return fmt.Sprintf("id-%04d", ids.Add(1)) },
		Logger: logger,
	}, pipeline.Settings{
		Model: model, Temperature: r.opts.Temperature, Policy: sc.Options.Confirm, Yes: sc.Options.Yes,
		MaxLLMCalls: sc.Options.MaxAutoReplies, MaxConsecutiveAutoReplies: sc.Options.MaxConsecutiveAutoReplies,
		TerminationWords: sc.Options.TerminationWords, Secrets: secrets,
		WaitJobs: sc.Options.WaitJobs, Output: output, ReplyWording: sc.Options.ReplyWording,
	})
	if err != nil {
		return cleanup, fmt.Errorf("%s: options: %w", sc.File, err)
	}
	r.agent = agent

	created, err := r.applySetup(ctx)
	if err != nil {
		return cleanup, err
	}
	if err := r.applyFlagSetup(ctx); err != nil {
		return cleanup, err
	}
	resultLines, err := r.applyResultsSetup(ctx)
	if err != nil {
		return cleanup, err
	}
	r.flagAware = usesFlags(sc)
	r.learn(ctx)
	r.tr.setup(sc, created)
	if len(sc.Setup.Flags)+len(sc.Setup.Segments) > 0 {
		r.tr.setupFlagLines(r.readFlags(ctx))
	}
	for _, l := range resultLines {
		fmt.Fprintf(&r.tr.b, "  %s\n", l)
	}
	return cleanup, nil
}

// applySetup creates the experiments (through create_experiment's own code,
// so setup and the agent agree on defaults) and initialises the users.
func (r *run) applySetup(ctx context.Context) ([]upgrade.Experiment, error) {
	var created []upgrade.Experiment
	for i, se := range r.sc.Setup.Experiments {
		where := fmt.Sprintf("%s:%d: setup experiment %q", r.sc.File, se.Line, se.Name)
		b, err := actions.BindCreate("experiment", se.Params)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		// The id derives from the scenario and the entry, so the
		// simulator's draws (keyed by experiment and user) are the same
		// on every run.
		out, err := b.Execute(ctx, actions.Env{API: r.admin}, fmt.Sprintf("scenario-setup/%s/%d", r.sc.Name, i))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		var res struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(out.Result, &res); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if se.Status != "" && se.Status != string(upgrade.StateInactive) {
			if _, err := r.admin.SetState(ctx, res.ID, upgrade.State(se.Status)); err != nil {
				return nil, fmt.Errorf("%s: set status %s: %w", where, se.Status, err)
			}
		}
		e, err := r.admin.Experiment(ctx, res.ID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		created = append(created, *e)
	}
	for _, u := range r.sc.Setup.Users {
		if _, err := r.admin.Init(ctx, u.ID, upgrade.InitRequest{Group: u.Group, WorkingGroup: u.WorkingGroup}); err != nil {
			return nil, fmt.Errorf("%s:%d: setup user %q: %w", r.sc.File, u.Line, u.ID, err)
		}
	}
	return created, nil
}

// learn reads the backend's experiments for templates and normalisation.
func (r *run) learn(ctx context.Context) ([]upgrade.Experiment, error) {
	es, err := r.admin.Experiments(ctx)
	if err != nil {
		return nil, err
	}
	r.res.learn(es)
	r.norm.learn(es)
	if r.flagAware {
		r.learnFlags(r.readFlags(ctx))
	}
	return es, nil
}

func (r *run) steps(ctx context.Context) {
	for i, st := range r.sc.Steps {
		n := i + 1
		r.clk.set(r.epoch.Add(time.Duration(n) * time.Minute))
		sr := r.step(ctx, n, st)
		r.rep.Steps = append(r.rep.Steps, sr)
		r.rep.LLMCalls += len(sr.LLMNodes)
		if len(sr.Failures) > 0 {
			prefix := fmt.Sprintf("step %d (%s): ", n, sr.Label)
			lines := make([]string, len(sr.Failures))
			for j, f := range sr.Failures {
				lines[j] = prefix + f
			}
			r.rep.Failures = append(r.rep.Failures, lines...)
			r.tr.failure(lines)
			return // later steps build on this one
		}
	}
}

func (r *run) step(ctx context.Context, n int, st Step) StepReport {
	sr := StepReport{Index: n, Label: st.Label()}
	fail := func(format string, args ...any) StepReport {
		sr.Failures = append(sr.Failures, fmt.Sprintf(format, args...))
		return sr
	}
	if _, err := r.learn(ctx); err != nil {
		return fail("reading the backend before the step: %v", err)
	}
	input, err := r.res.expand(st.Text)
	if err != nil {
		return fail("%v", err)
	}
	sr.Label = Step{Kind: st.Kind, Text: input, Resume: st.Resume}.Label()
	if r.llmS != nil {
		replies, err := r.res.expandReplies(st.LLM)
		if err != nil {
			return fail("%v", err)
		}
		r.llmS.Enqueue(replies...)
	}

	var o outcome
	began := time.Now()
	switch st.Kind {
	case StepSay:
		if r.sess == nil {
			r.sess = pipeline.NewSession(SessionID, r.clk.now())
			r.res.session = SessionID
			r.norm.session = SessionID
		}
		o.res, o.err = r.agent.Ask(ctx, r.sess, input)
	case StepAnswer:
		if ic := r.sessInterrupt(); st.IfAsked && (ic == nil || ic.Kind != checkpoint.KindConfirmation) {
			sr.Skipped = true
			o = r.last
			break
		}
		if ic := r.sessInterrupt(); ic == nil || ic.Kind != checkpoint.KindConfirmation {
			r.discardScript()
			return fail("answer: the session is not awaiting a confirmation (status %s)", r.sessionStatus())
		}
		o.res, o.err = r.agent.Ask(ctx, r.sess, input)
	case StepResume:
		if r.sess == nil {
			r.discardScript()
			return fail("resume: there is no session yet")
		}
		wait := time.Duration(0)
		if st.Resume.Wait {
			wait = st.Resume.Timeout
			if wait <= 0 {
				wait = time.Minute
			}
		}
		o.res, o.err = r.agent.Resume(ctx, r.sess, pipeline.ResumeRequest{Wait: wait})
	}
	sr.Latency = time.Since(began)
	sr.LLMNodes = r.count.take()
	if !sr.Skipped {
		sr.Result, sr.Err = o.res, o.err
		r.last = o
	}

	if r.llmS != nil {
		reqs := r.llmS.Requests()
		for _, req := range reqs[min(r.seen, len(reqs)):] {
			n := req.PromptChars()
			sr.PromptChars += n
			sr.CallChars = append(sr.CallChars, CallChars{Node: req.Node, Chars: n, Tools: toolChars(req.Body)})
		}
		r.seen = len(reqs)
		if err := r.llmS.Verify(); err != nil {
			sr.Failures = append(sr.Failures, "scripted LLM: "+err.Error())
		}
		r.llmS.Reset()
	}
	// The next step runs as a new process would: from the checkpoint.
	if r.sess != nil {
		loaded, lerr := pipeline.LoadSession(r.store, r.sess.ID())
		switch {
		case lerr == nil:
			r.sess = loaded
		case o.err == nil:
			sr.Failures = append(sr.Failures, fmt.Sprintf("reload the checkpoint: %v", lerr))
		}
	}
	var status pipeline.Status
	if o.res != nil {
		status = o.res.Status
		if o.res.Job != nil {
			r.res.job = o.res.Job.ID
			r.norm.job(o.res.Job.ID)
		}
	}
	if ic := r.sessInterrupt(); ic != nil && ic.Job != nil {
		r.res.job = ic.Job.ID
		r.norm.job(ic.Job.ID)
	}
	o.exitCode = exitcode.Code(status, o.err)
	sr.ExitCode = o.exitCode

	es, lerr := r.learn(ctx)
	r.tr.step(n, st, input, o, sr.LLMNodes)

	expect, err := r.res.expandExpect(st.Expect)
	if err != nil {
		sr.Failures = append(sr.Failures, err.Error())
		return sr
	}
	be := &backendState{experiments: es}
	if expect.Backend != nil && len(expect.Backend.Flags)+len(expect.Backend.FlagAbsent)+len(expect.Backend.Segments)+len(expect.Backend.SegmentAbsent) > 0 {
		be.flags = r.readFlags(ctx)
	}
	if expect.Backend != nil && expect.Backend.expectsResults() {
		be.results = r.readResults(ctx)
	}
	if r.sim != nil {
		be.user = r.sim.Sim().User
	}
	be.enrollment = func(id string) (*upgrade.EnrollmentStats, error) { return r.admin.EnrollmentStats(ctx, id) }
	if expect.Backend != nil && lerr != nil {
		sr.Failures = append(sr.Failures, fmt.Sprintf("backend: cannot read the experiments: %v", lerr))
		expect.Backend = nil
	}
	sr.Failures = append(sr.Failures, check(expect, o, be)...)
	if ic := r.sessInterrupt(); st.NoConfirmation && ic != nil && ic.Kind == checkpoint.KindConfirmation {
		sr.Failures = append(sr.Failures, "the agent asked for a confirmation and the case gives no answer for this turn")
	}
	return sr
}

func (r *run) discardScript() {
	if r.llmS != nil {
		r.llmS.Reset()
	}
}

func (r *run) sessionStatus() string {
	if r.sess == nil {
		return "no session"
	}
	return string(r.sess.Status())
}

// sessInterrupt is what stopped the session's last turn (nil: nothing, or
// no session yet).
func (r *run) sessInterrupt() *checkpoint.Interrupt {
	if r.sess == nil {
		return nil
	}
	return r.sess.Interrupt()
}

// finish normalises the transcript and compares it with the golden file.
func (r *run) finish() {
	text := r.tr.b.String()
	text = redact.String(text, r.secrets...)
	text = r.norm.apply(text)
	r.rep.Transcript = text
	if !r.sc.Golden {
		return
	}
	r.rep.GoldenFile = GoldenPath(r.sc, r.opts.GoldenDir)
	if len(r.rep.Failures) > 0 {
		// A failing run is not compared (its diff would only repeat the
		// failure) and never becomes the golden file.
		return
	}
	d, written, err := compareGolden(r.rep.GoldenFile, []byte(text), r.opts.Update)
	switch {
	case err != nil:
		r.rep.Failures = append(r.rep.Failures, err.Error())
	case d != "":
		r.rep.GoldenDiff = d
		r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("the transcript differs from %s (run with --update to accept it)", r.rep.GoldenFile))
	}
	r.rep.GoldenUpdated = written
}

// Summary is the one-line result: "PASS name (1.2s, 5 LLM calls)".
func (r *Report) Summary() string {
	word := "PASS"
	if !r.Passed() {
		word = "FAIL"
	}
	extra := ""
	if r.GoldenUpdated {
		extra = ", golden updated"
	}
	return fmt.Sprintf("%s %s (%.1fs, %d LLM %s%s)", word, r.Name, r.Duration.Seconds(), r.LLMCalls, plural(r.LLMCalls, "call", "calls"), extra)
}

// Details are the failure lines and the golden diff, indented, for a
// failing scenario ("" when it passed).
func (r *Report) Details() string {
	if r.Passed() {
		return ""
	}
	var b strings.Builder
	for _, f := range r.Failures {
		for _, line := range strings.Split(f, "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	if r.GoldenDiff != "" {
		for _, line := range strings.Split(strings.TrimRight(r.GoldenDiff, "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// IsUsage reports whether a run error means bad input or configuration
// (exit 2) rather than a failure.
func IsUsage(err error) bool { return exitcode.Code("", err) == exitcode.Usage }
