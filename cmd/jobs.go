package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
)

// NewCmdJobs builds `jobs list|show|cancel` and the hidden `jobs work`.
func NewCmdJobs(f *Factory) *cobra.Command {
	c := groupCmd("jobs", "Long-running jobs: list, show, cancel")
	c.Long = `Long-running jobs (the condition-balance simulation) run in a detached worker
process. Their records live in <state-dir>/jobs. The session that started a job
picks up its result on "upgrade-agent resume".`
	c.AddCommand(
		withOutputs(&cobra.Command{
			Use: "list", Short: "List jobs, most recent first", Args: noArgs,
			Example: "  upgrade-agent jobs list\n  upgrade-agent jobs list -o wide\n  upgrade-agent jobs list -o json",
			RunE:    func(c *cobra.Command, _ []string) error { return runJobsList(c.Context(), f) },
		}, "wide", "json", "yaml"),
		withOutputs(&cobra.Command{
			Use: "show ID", Short: "Show one job with its result (ID: the id or a unique prefix)", Args: exactArgs("ID"),
			Example: "  upgrade-agent jobs show 9d1c\n  upgrade-agent jobs show 9d1c -o json",
			RunE:    func(c *cobra.Command, args []string) error { return runJobsShow(c.Context(), f, args[0]) },
		}, "json", "yaml"),
		withOutputs(&cobra.Command{
			Use: "cancel ID", Short: "Stop a job and mark it cancelled (ID: the id or a unique prefix)", Args: exactArgs("ID"),
			Long: `Mark the job cancelled and send its worker SIGTERM. The session waiting on it
reports the cancellation as the action's result on its next resume.`,
			Example: "  upgrade-agent jobs cancel 9d1c\n  upgrade-agent resume --wait   # the waiting session reports the cancellation",
			RunE:    func(c *cobra.Command, args []string) error { return runJobsCancel(c.Context(), f, args[0]) },
		}, "json", "yaml"),
		&cobra.Command{
			Use: "work ID", Short: "Run a job (started by the agent, not by people)", Args: exactArgs("ID"),
			Hidden: true,
			RunE:   func(c *cobra.Command, args []string) error { return runJobsWork(c.Context(), f, args[0]) },
		},
	)
	return c
}

// JobRow is one job in `jobs list`.
type JobRow struct {
	ID        string           `json:"id" yaml:"id"`
	SessionID string           `json:"session_id" yaml:"session_id"`
	Action    string           `json:"action" yaml:"action"`
	State     actions.JobState `json:"state" yaml:"state"`
	Progress  actions.Progress `json:"progress" yaml:"progress"`
	// Stale: the job should be running but its worker is gone; the next
	// resume of its session restarts it.
	Stale     bool      `json:"stale,omitempty" yaml:"stale,omitempty"`
	Error     string    `json:"error,omitempty" yaml:"error,omitempty"`
	CreatedAt time.Time `json:"created_at" yaml:"created_at"`
	UpdatedAt time.Time `json:"updated_at" yaml:"updated_at"`
}

// JobDetail is `jobs show`: the record, whether its worker is gone, and
// where the worker's log is.
type JobDetail struct {
	*jobs.Record
	Stale   bool   `json:"stale,omitempty"`
	LogFile string `json:"log_file"`
}

func openJobs(f *Factory) (*jobs.Runner, error) {
	dir, err := f.StateDir()
	if err != nil {
		return nil, err
	}
	store, err := jobs.OpenStore(dir)
	if err != nil {
		return nil, err
	}
	store.Now = f.Now
	if pg, err := f.pgStore(); err != nil {
		return nil, err
	} else if pg != nil {
		store.Backend = pg.Jobs()
	}
	r := jobs.NewRunner(store)
	r.Actions = f.Actions()
	r.Now = f.Now
	r.Logger = f.Logger()
	return r, nil
}

// jobInputError makes a bad or unknown job id, or an unreadable record,
// exit 2; other errors pass.
func jobInputError(err error) error {
	if errors.Is(err, jobs.ErrNotFound) || errors.Is(err, jobs.ErrInvalidID) || errors.Is(err, jobs.ErrCorrupt) {
		return &UsageError{Err: err}
	}
	return err
}

func runJobsList(_ context.Context, f *Factory) error {
	r, err := openJobs(f)
	if err != nil {
		return err
	}
	recs, listErr := r.Store.List()
	if listErr != nil {
		// One unreadable record must not hide the others.
		fmt.Fprintf(f.IO.ErrOut, "warning: %v\n", listErr)
	}
	rows := make([]JobRow, 0, len(recs))
	for _, rec := range recs {
		rows = append(rows, JobRow{ID: rec.ID, SessionID: rec.SessionID, Action: rec.Action, State: rec.State,
			Progress: rec.Progress, Stale: r.Stale(rec), Error: rec.Error, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt})
	}
	if out := f.opts().Output; isData(out) {
		return WriteData(f.IO.Out, out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no jobs")
		return nil
	}
	t := Table{Columns: []Column{{Header: "ID"}, {Header: "SESSION"}, {Header: "ACTION", Shrink: true}, {Header: "STATE", Shrink: true},
		{Header: "PROGRESS"}, {Header: "UPDATED"}}}
	for _, row := range rows {
		state := string(row.State)
		if row.Stale {
			state += " (no worker)"
		}
		id := row.ID
		if f.opts().Output != "wide" {
			id = shortID(id) // jobs show takes a prefix
		}
		t.Rows = append(t.Rows, []string{id, row.SessionID, row.Action, state, formatProgress(row.Progress),
			row.UpdatedAt.Local().Format(time.DateTime)})
	}
	return t.Write(f.IO.Out, f.opts().Output, f.IO.Width)
}

func formatProgress(p actions.Progress) string {
	if p.Total == 0 {
		return "-"
	}
	return strconv.Itoa(p.Done) + "/" + strconv.Itoa(p.Total)
}

func runJobsShow(_ context.Context, f *Factory, id string) error {
	r, err := openJobs(f)
	if err != nil {
		return err
	}
	if id, err = resolveJob(r.Store, id); err != nil {
		return err
	}
	rec, err := r.Store.Load(id)
	if err != nil {
		return jobInputError(err)
	}
	d := JobDetail{Record: rec, Stale: r.Stale(rec), LogFile: r.Store.LogPath(id)}
	if out := f.opts().Output; out == "json" || out == "yaml" {
		return WriteData(f.IO.Out, out, d)
	}
	state := string(rec.State)
	if d.Stale {
		state += " (its worker is gone; `upgrade-agent resume " + rec.SessionID + "` restarts it)"
	}
	heartbeat := ""
	if rec.HeartbeatAt != nil {
		heartbeat = rec.HeartbeatAt.Local().Format(time.DateTime)
		if !rec.Terminal() {
			heartbeat += fmt.Sprintf(" (%s ago)", f.Now().Sub(*rec.HeartbeatAt).Round(time.Second))
		}
	}
	worker := ""
	if rec.PID > 0 {
		worker = fmt.Sprintf("pid %d, attempt %d", rec.PID, rec.Attempts)
	}
	errText := rec.Error
	if rec.ErrorType != "" && errText != "" {
		errText = rec.ErrorType + ": " + errText
	}
	w := f.IO.Out
	if err := describe(w, [][2]string{
		{"Job", rec.ID},
		{"Session", rec.SessionID},
		{"Action", rec.Action},
		{"State", state},
		{"Progress", formatProgress(rec.Progress)},
		{"Created", rec.CreatedAt.Local().Format(time.DateTime)},
		{"Updated", rec.UpdatedAt.Local().Format(time.DateTime)},
		{"Heartbeat", heartbeat},
		{"Worker", worker},
		{"Error", errText},
		{"Log", d.LogFile},
		{"Params", compactJSON(rec.Params)},
	}); err != nil {
		return err
	}
	if len(rec.Result) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nResult:")
	// The action words its own result; one that has no words for it (or
	// is no longer registered) is shown as JSON.
	if act, ok := f.Actions().Lookup(rec.Action); ok {
		if r, ok := act.(actions.Reporter); ok {
			if text := r.Report(rec.Result); text != "" {
				fmt.Fprintln(w, indentLines(text, "  "))
				return nil
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, rec.Result, "  ", "  "); err != nil {
		fmt.Fprintf(w, "  %s\n", rec.Result)
		return nil
	}
	fmt.Fprintf(w, "  %s\n", buf.String())
	return nil
}

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// indentLines puts prefix before every line of text that is not empty.
func indentLines(text, prefix string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

func runJobsCancel(ctx context.Context, f *Factory, id string) error {
	r, err := openJobs(f)
	if err != nil {
		return err
	}
	if id, err = resolveJob(r.Store, id); err != nil {
		return err
	}
	rec, err := r.Cancel(ctx, id)
	switch {
	case errors.Is(err, jobs.ErrFinished) && rec != nil && rec.State == actions.JobCancelled:
		// Cancelling twice is what a retrying script does; it is done.
		fmt.Fprintf(f.IO.ErrOut, "job %s was already cancelled\n", id)
	case errors.Is(err, jobs.ErrFinished):
		return &UsageError{Err: fmt.Errorf("job %s has already %s: nothing to cancel", id, rec.State)}
	case err != nil:
		return jobInputError(err)
	}
	if err == nil {
		auditJobCancelled(f, rec.ID, rec.SessionID, rec.Action, rec.Params, rec.Error)
	}
	if out := f.opts().Output; out == "json" || out == "yaml" {
		return WriteData(f.IO.Out, out, JobDetail{Record: rec, LogFile: r.Store.LogPath(id)})
	}
	fmt.Fprintf(f.IO.Out, "job %s cancelled at %s\n", id, formatProgress(rec.Progress))
	if rec.SessionID != "" {
		fmt.Fprintf(f.IO.ErrOut, "session %s reports it on its next resume: upgrade-agent resume %s\n", rec.SessionID, rec.SessionID)
	}
	return nil
}

// runJobsWork is the detached worker: it runs job id to its end against
// the UpGrade its parent used (the global flags and UPGRADE_API_TOKEN
// passed by the runner; with the embedded simulator, one started here on
// the same data file).
func runJobsWork(ctx context.Context, f *Factory, id string) error {
	r, err := openJobs(f)
	if err != nil {
		return err
	}
	if _, err := r.Store.Load(id); err != nil {
		return jobInputError(err)
	}
	api, cleanup, err := f.Upgrade(ctx)
	if err != nil {
		// These settings will not work on a restart either.
		if _, uerr := r.Store.MarkFailed(id, err); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return err
	}
	defer cleanup()
	w := &jobs.Worker{Store: r.Store, API: api, Actions: f.Actions(), Now: f.Now, Logger: newLogger(f.IO.ErrOut, true, f.Secrets())}
	return w.Run(ctx, id)
}
