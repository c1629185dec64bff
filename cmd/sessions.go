package cmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

func newCmdSessions(f *Factory) *cobra.Command {
	c := groupCmd("sessions", "Inspect stored sessions (checkpoints)")
	c.AddCommand(
		newCmdSessionsList(f),
		withOutputs(&cobra.Command{
			Use: "show SESSION", Short: "Show one session (SESSION: its id or a unique prefix)", Args: exactArgs("SESSION"),
			Example: "  upgrade-agent sessions show 3f2a9c0d1e4b\n  upgrade-agent sessions show 3f2a -o json",
			RunE:    func(c *cobra.Command, args []string) error { return runSessionsShow(c.Context(), f, args[0]) },
		}, "json", "yaml"),
		withOutputs(&cobra.Command{
			Use: "rm SESSION...", Short: "Remove sessions (each an id or a unique prefix)", Args: cobra.MinimumNArgs(1),
			Example: "  upgrade-agent sessions rm 3f2a9c0d1e4b\n  upgrade-agent sessions rm 3f2a 7c1e",
			RunE:    func(c *cobra.Command, args []string) error { return runSessionsRm(c.Context(), f, args) },
		}),
		newCmdSessionsExport(f),
		newCmdSessionsImport(f),
	)
	return c
}

// SessionRow is one session in `sessions list`.
type SessionRow struct {
	ID          string           `json:"id" yaml:"id"`
	Status      string           `json:"status" yaml:"status"`
	Turns       int              `json:"turns" yaml:"turns"`
	LastMessage string           `json:"last_message" yaml:"last_message"`
	UpdatedAt   time.Time        `json:"updated_at" yaml:"updated_at"`
	Usage       checkpoint.Usage `json:"usage" yaml:"usage"`
	Error       string           `json:"error,omitempty" yaml:"error,omitempty"`
}

func runSessionsList(_ context.Context, f *Factory) error {
	store, err := f.Sessions()
	if err != nil {
		return err
	}
	list, err := store.List()
	if err != nil {
		return err
	}
	rows := make([]SessionRow, 0, len(list))
	for _, s := range list {
		rows = append(rows, SessionRow{ID: s.ID, Status: string(s.Status), Turns: s.Turns, LastMessage: s.LastMessage,
			UpdatedAt: s.UpdatedAt, Usage: s.Usage, Error: s.Error})
	}
	if out := f.opts().Output; isData(out) {
		return WriteData(f.IO.Out, out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no sessions")
		return nil
	}
	t := Table{Columns: []Column{{Header: "ID"}, {Header: "STATUS"}, {Header: "TURNS"}, {Header: "LAST MESSAGE", Shrink: true},
		{Header: "UPDATED"}, {Header: "LLM CALLS", Wide: true}, {Header: "TOKENS", Wide: true}}}
	for _, r := range rows {
		last := r.LastMessage
		if r.Error != "" {
			last = r.Error
		}
		t.Rows = append(t.Rows, []string{r.ID, r.Status, strconv.Itoa(r.Turns), last, r.UpdatedAt.Local().Format("2006-01-02 15:04"),
			strconv.Itoa(r.Usage.LLMCalls), strconv.Itoa(r.Usage.PromptTokens + r.Usage.CompletionTokens)})
	}
	return t.Write(f.IO.Out, f.opts().Output, f.IO.Width)
}

// SessionDetail is `sessions show`.
type SessionDetail struct {
	ID            string                `json:"id" yaml:"id"`
	Status        string                `json:"status" yaml:"status"`
	Turns         int                   `json:"turns" yaml:"turns"`
	CreatedAt     time.Time             `json:"created_at" yaml:"created_at"`
	UpdatedAt     time.Time             `json:"updated_at" yaml:"updated_at"`
	Usage         checkpoint.Usage      `json:"usage" yaml:"usage"`
	Interrupt     *checkpoint.Interrupt `json:"interrupt,omitempty" yaml:"interrupt,omitempty"`
	PendingAction string                `json:"pending_action,omitempty" yaml:"pending_action,omitempty"`
	History       []pipeline.Exchange   `json:"history" yaml:"history"`
	Actions       []pipeline.LogEntry   `json:"execution_log" yaml:"execution_log"`
	// TurnUsage is the LLM work of each run that called the model, the
	// most recent 50 (none in sessions saved before it was recorded).
	TurnUsage []pipeline.TurnUsage `json:"turn_usage" yaml:"turn_usage"`
	Path      string               `json:"path" yaml:"path"`
	// UpgradeServer is the UpGrade the session belongs to ("" = not recorded).
	UpgradeServer string `json:"upgrade_server,omitempty" yaml:"upgrade_server,omitempty"`
	// Proposal is what the audit trail recorded when the awaited
	// confirmation was proposed: who, and the target by name.
	Proposal *ProposalRef `json:"proposal,omitempty" yaml:"proposal,omitempty"`
}

func runSessionsShow(_ context.Context, f *Factory, id string) error {
	store, err := f.Sessions()
	if err != nil {
		return err
	}
	if id, err = resolveSession(store, id); err != nil {
		return err
	}
	cp, err := store.Load(id)
	var st *pipeline.State
	if err == nil {
		st, err = pipeline.DecodeState(cp)
	}
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
			return &UsageError{Err: err}
		}
		return err
	}
	d := SessionDetail{ID: cp.SessionID, Status: string(cp.Status), Turns: cp.Counters.Turns, CreatedAt: cp.CreatedAt,
		UpdatedAt: cp.UpdatedAt, Usage: cp.Usage, Interrupt: cp.Interrupt, PendingAction: st.ActionNeeded,
		History: st.ConversationHistory, Actions: st.ExecutionLog, TurnUsage: st.TurnUsage, Path: store.Where(id), UpgradeServer: cp.UpgradeServer}
	if d.TurnUsage == nil {
		d.TurnUsage = []pipeline.TurnUsage{}
	}
	if ic := cp.Interrupt; ic != nil && ic.Confirmation != nil {
		d.Proposal = proposalOf(f, cp.SessionID, ic)
	}
	if out := f.opts().Output; out == "json" || out == "yaml" {
		return WriteData(f.IO.Out, out, d)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "Session:  %s\nStatus:   %s\nTurns:    %d\nCreated:  %s\nUpdated:  %s\nLLM:      %d calls, %d prompt + %d completion tokens (%d cached)\nFile:     %s\n",
		d.ID, d.Status, d.Turns, d.CreatedAt.Format(time.RFC3339), d.UpdatedAt.Format(time.RFC3339),
		d.Usage.LLMCalls, d.Usage.PromptTokens, d.Usage.CompletionTokens, d.Usage.CachedTokens, d.Path)
	if d.UpgradeServer != "" {
		fmt.Fprintf(w, "Server:   %s\n", describeServer(d.UpgradeServer))
	}
	if ic := d.Interrupt; ic != nil {
		switch {
		case ic.Confirmation != nil:
			fmt.Fprintf(w, "Awaiting: confirmation of %s%s\n%s\n", ic.Confirmation.Action, d.Proposal.describe(ic), ic.Confirmation.Message)
		case ic.Job != nil:
			fmt.Fprintf(w, "Awaiting: job %s (%s)\n", ic.Job.ID, ic.Job.Action)
		}
	}
	if len(d.TurnUsage) > 0 {
		fmt.Fprintln(w, "\nLLM per turn:")
		for _, u := range d.TurnUsage {
			est := ""
			if u.Estimated {
				est = " (estimated: characters/4)"
			}
			fmt.Fprintf(w, "  turn %d  %s  %d calls, %d prompt + %d completion tokens (%d cached)%s\n",
				u.Turn, u.At.Format(time.RFC3339), u.LLMCalls, u.PromptTokens, u.CompletionTokens, u.CachedTokens, est)
		}
	}
	if len(d.Actions) > 0 {
		fmt.Fprintln(w, "\nActions:")
		for _, a := range d.Actions {
			fmt.Fprintf(w, "  %s  %s  %s %s\n", a.Timestamp, a.Action, a.Status, a.Error)
		}
	}
	if n := len(d.History); n > 0 {
		fmt.Fprintln(w, "\nRecent exchanges:")
		for _, ex := range d.History[max(0, n-5):] {
			fmt.Fprintf(w, "  > %s\n  %s\n", ex.User, truncateLine(ex.Assistant, 200))
		}
	}
	return nil
}

func truncateLine(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func runSessionsRm(_ context.Context, f *Factory, ids []string) error {
	store, err := f.Sessions()
	if err != nil {
		return err
	}
	for _, ref := range ids {
		id, err := resolveSession(store, ref)
		if err != nil {
			return err
		}
		if err := store.Remove(id); err != nil {
			if errors.Is(err, checkpoint.ErrNotFound) {
				return &UsageError{Err: err}
			}
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "removed session %s\n", id)
	}
	return nil
}
