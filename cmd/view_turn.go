package cmd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/config"
	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// TurnView renders the turns of ask and resume. There are two, chosen by
// --output: text for people (the reply on stdout as soon as it is final,
// hints and progress on stderr) and JSON for programs (one object on
// stdout).
type TurnView interface {
	// Options are the agent's callbacks for the view's early reply and
	// streaming, given to pipeline.New.
	Options() []pipeline.Option
	// Progress shows a job's progress while resume waits on it.
	Progress(st pipeline.JobStatus)
	// Result renders the turn's result.
	Result(res *pipeline.Result, newSession bool) error

	// noteLLM tells the view the stand-in of an unconfigured model (nil
	// when one is configured), so the result says llm_unavailable.
	noteLLM(u *unconfiguredLLM)
	unconfigured() *unconfiguredLLM
}

// llmNote implements TurnView's noteLLM for both views.
type llmNote struct{ u *unconfiguredLLM }

func (n *llmNote) noteLLM(u *unconfiguredLLM)     { n.u = u }
func (n *llmNote) unconfigured() *unconfiguredLLM { return n.u }

// NewTurnView picks the view for an --output format.
func NewTurnView(format string, streams *IOStreams, now func() time.Time) TurnView {
	if format == "json" {
		return &jsonTurnView{out: streams.Out, errOut: streams.ErrOut, now: now}
	}
	return &humanTurnView{io: streams, now: now}
}

// jsonTurnView writes the result as one JSON object on stdout; a job's
// progress goes to stderr as plain lines, so stdout stays one document.
type jsonTurnView struct {
	out, errOut io.Writer
	now         func() time.Time
	progress    *jobProgress
	llmNote
}

func (v *jsonTurnView) Options() []pipeline.Option { return nil }

func (v *jsonTurnView) Progress(st pipeline.JobStatus) {
	if v.progress == nil {
		v.progress = newJobProgress(rawWriter(v.errOut), false, st.ID, v.now)
	}
	v.progress.update(st)
}

func (v *jsonTurnView) Result(res *pipeline.Result, _ bool) error {
	return WriteData(v.out, "json", res)
}

type humanTurnView struct {
	io       *IOStreams
	now      func() time.Time
	printed  bool
	streamed strings.Builder
	progress *jobProgress
	llmNote
	// failure holds the lines of the error that failed the turn: printed
	// once, by the command, not also among the problems.
	failure map[string]bool
}

// Options print the reply as soon as it is final, before the optional
// output node runs. On a terminal the responder's text is streamed as it
// arrives, and only what Go adds after it (a confirmation text) is printed
// at the end.
func (v *humanTurnView) Options() []pipeline.Option {
	opts := []pipeline.Option{pipeline.WithOnResponse(v.respond)}
	if v.io.StdoutTTY {
		opts = append(opts, pipeline.WithStreamText(v.stream))
	}
	return opts
}

// stream prints the responder's text as it arrives.
func (v *humanTurnView) stream(delta string) {
	if v.streamed.Len() == 0 {
		delta = strings.TrimLeft(delta, " \n")
	}
	v.streamed.WriteString(delta)
	fmt.Fprint(v.io.Out, delta)
}

// respond prints the final reply, or what of it streaming has not shown.
func (v *humanTurnView) respond(text string) {
	out := v.io.Out
	v.printed = true
	if s := strings.TrimSpace(v.streamed.String()); s != "" && strings.HasPrefix(text, s) {
		fmt.Fprintln(out, text[len(s):])
		return
	}
	if v.streamed.Len() > 0 {
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, text)
}

func (v *humanTurnView) Progress(st pipeline.JobStatus) {
	if v.progress == nil {
		v.progress = newJobProgress(rawWriter(v.io.ErrOut), v.io.StderrTTY, st.ID, v.now)
	}
	v.progress.update(st)
}

func (v *humanTurnView) Result(res *pipeline.Result, newSession bool) error {
	if v.progress != nil {
		v.progress.finish()
	}
	if !v.printed && res.Response != "" {
		fmt.Fprintln(v.io.Out, res.Response)
	}
	errOut := v.io.ErrOut
	writeProblems(errOut, res, v.failure)
	if newSession && v.u.calls() == 0 {
		// (A turn that met no configured model stored no session.)
		fmt.Fprintf(errOut, "session: %s\n", res.SessionID)
	}
	switch res.Status {
	case pipeline.StatusAwaitingConfirmation:
		fmt.Fprintf(errOut, "awaiting confirmation: upgrade-agent resume %s --answer yes\n", res.SessionID)
	case pipeline.StatusWaitingJob:
		msg := "waiting on a job"
		if res.Job != nil {
			msg = fmt.Sprintf("waiting on job %s", res.Job.ID)
			if res.Job.Progress != nil {
				msg += fmt.Sprintf(" (%d/%d)", res.Job.Progress.Done, res.Job.Progress.Total)
			}
		}
		fmt.Fprintf(errOut, "%s: upgrade-agent resume %s --wait\n", msg, res.SessionID)
	case pipeline.StatusTerminated:
		fmt.Fprintf(errOut, "terminated: %s\n", res.TerminationReason)
	}
	return nil
}

// renderTurn renders a turn's result with the view and returns the error
// that gives the exit code (exitcode.Code decides it from the result's
// status and the turn's error). Each failure is said once: in text mode
// the turn's error is the "Error: ..." line, not also an "error: ..." line
// among the problems, and what the reply already says is not repeated.
func renderTurn(v TurnView, res *pipeline.Result, turnErr error, newSession bool) error {
	if res == nil {
		return turnErr
	}
	settleUnavailable(res, v.unconfigured())
	hv, human := v.(*humanTurnView)
	if human && turnErr != nil {
		hv.failure = map[string]bool{}
		for _, line := range strings.Split(turnErr.Error(), "\n") {
			hv.failure[line] = true
		}
	}
	if err := v.Result(res, newSession); err != nil {
		return err
	}
	if turnErr == nil {
		return statusError(res.Status)
	}
	if human {
		return &saidError{err: turnErr, rest: unsaid(turnErr.Error(), res)}
	}
	return turnErr
}

// saidError is a turn's error whose lines the reply has said, but for
// rest; it keeps the error's kind (exit code, hints).
type saidError struct {
	err  error
	rest string
}

func (e *saidError) Error() string { return e.rest }
func (e *saidError) Unwrap() error { return e.err }

// unsaid are the lines of msg that the reply did not say already.
func unsaid(msg string, res *pipeline.Result) string {
	shown := func(line string) bool {
		return strings.TrimSpace(line) == "" || strings.Contains(res.Response, line)
	}
	var rest []string
	for _, line := range strings.Split(msg, "\n") {
		if !shown(line) {
			rest = append(rest, line)
		}
	}
	return strings.Join(rest, "\n")
}

// statusError is the silent error that makes a paused or suspended turn
// exit 10 or 11 (nil for a completed one).
func statusError(status pipeline.Status) error {
	switch status {
	case pipeline.StatusAwaitingConfirmation, pipeline.StatusWaitingJob, pipeline.StatusFailed:
		return &turnStatus{status: status}
	}
	return nil
}

// turnStatus carries a turn's status to the exit code; it prints nothing.
type turnStatus struct{ status pipeline.Status }

func (e *turnStatus) Error() string { return "" }

// ExitCode delegates to the one mapping.
func (e *turnStatus) ExitCode() int { return exitcode.Code(e.status, nil) }

// trustedServers are the MCP servers the config marks trusted.
func trustedServers(cfg *config.Config) []string {
	var names []string
	for _, s := range cfg.MCPServers {
		if s.Trusted {
			names = append(names, s.Name)
		}
	}
	return names
}

// jobProgress shows a job's progress: a progress line redrawn in place on
// a terminal, plain lines ("job ID: 120/500") otherwise, at most one a
// second, plus a final line when the job ends.
type jobProgress struct {
	w     io.Writer
	tty   bool
	id    string
	now   func() time.Time
	bar   *progressLine
	last  time.Time
	shown string
}

func newJobProgress(w io.Writer, tty bool, id string, now func() time.Time) *jobProgress {
	return &jobProgress{w: w, tty: tty, id: id, now: now}
}

func (p *jobProgress) update(st pipeline.JobStatus) {
	if p.tty && st.Total > 0 {
		if p.bar == nil {
			p.bar = newProgressLine(p.w, "job "+p.id, st.Done, p.now)
		}
		p.bar.set(st.Done, st.Total)
		if st.Terminal() && st.State != actions.JobSucceeded {
			p.bar.end()
			p.bar = nil
			fmt.Fprintf(p.w, "job %s %s at %d/%d\n", p.id, st.State, st.Done, st.Total)
		}
		return
	}
	line := fmt.Sprintf("job %s: %d/%d", p.id, st.Done, st.Total)
	if st.Terminal() {
		line += " " + string(st.State)
	}
	now := p.now()
	switch {
	case line == p.shown:
		return
	case !st.Terminal() && !p.last.IsZero() && now.Sub(p.last) < time.Second:
		return
	}
	fmt.Fprintln(p.w, line)
	p.shown, p.last = line, now
}

func (p *jobProgress) finish() {
	if p.bar != nil {
		// Stopped early (timeout, Ctrl-C): end the bar's line.
		p.bar.end()
	}
}
