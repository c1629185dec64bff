package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// ChangesListOptions are the inputs of `changes list`.
type ChangesListOptions struct {
	Session string
	Target  string
	Since   string
}

func newCmdChanges(f *Factory) *cobra.Command {
	c := groupCmd("changes", "List and show the writes the agent carried out (docs/undo.md)")
	c.AddCommand(NewCmdChangesList(f, nil), NewCmdChangesShow(f, nil))
	return c
}

// NewCmdChangesList builds `changes list`.
func NewCmdChangesList(f *Factory, runF func(context.Context, *ChangesListOptions) error) *cobra.Command {
	o := &ChangesListOptions{}
	c := &cobra.Command{
		Use:   "list",
		Short: "List recorded changes, newest first",
		Long: `List the writes the agent carried out, newest first: id, when, who approved, the
action, its target by name and whether it can be undone (yes, no, or done when
it was undone already).`,
		Example: "  upgrade-agent changes list\n  upgrade-agent changes list --since 24h --target MATH_HINTS -o json",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runChangesList(c.Context(), f, o)
		},
	}
	c.Flags().StringVar(&o.Session, "session", "", "only the changes of session `ID` (or a unique prefix)")
	c.Flags().StringVar(&o.Target, "target", "", "only the changes of this object: its id, name or flag key (`REF`)")
	c.Flags().StringVar(&o.Since, "since", "", "only changes since `DURATION` ago (24h, 7d) or a TIME (RFC 3339 or 2006-01-02)")
	return withOutputs(c, "json", "yaml", "wide")
}

// ChangeRow is one change in `changes list -o json`.
type ChangeRow struct {
	ID         string         `json:"id" yaml:"id"`
	SessionID  string         `json:"session_id" yaml:"session_id"`
	ExecutedAt time.Time      `json:"executed_at" yaml:"executed_at"`
	ApprovedBy string         `json:"approved_by" yaml:"approved_by"`
	Action     string         `json:"action" yaml:"action"`
	Target     actions.Target `json:"target" yaml:"target"`
	// Undoable is yes, no, or done (undone already).
	Undoable string `json:"undoable" yaml:"undoable"`
	Undoes   string `json:"undoes,omitempty" yaml:"undoes,omitempty"`
	UndoneBy string `json:"undone_by,omitempty" yaml:"undone_by,omitempty"`
	TraceID  string `json:"trace_id,omitempty" yaml:"trace_id,omitempty"`
}

func changeRow(c actions.Change) ChangeRow {
	r := ChangeRow{ID: c.ID, SessionID: c.SessionID, ExecutedAt: c.ExecutedAt, ApprovedBy: c.ApprovedBy, Action: c.Action,
		Target: c.Target, Undoable: undoableWord(c), Undoes: c.Undoes, UndoneBy: c.UndoneBy, TraceID: c.TraceID}
	return r
}

func undoableWord(c actions.Change) string {
	switch {
	case c.UndoneBy != "":
		return "done"
	case c.Undoable:
		return "yes"
	}
	return "no"
}

// parseSince reads --since: a duration back from now (24h, 90m, 7d, "2h
// ago"), or a time (RFC 3339, 2006-01-02T15:04, "2006-01-02 15:04",
// 2006-01-02, read in the local zone). A negative duration or a time
// in the future is refused: it would list nothing without saying why.
func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	bad := func(format string, args ...any) error {
		return &FlagError{Err: fmt.Errorf("--since %q: "+format, append([]any{s}, args...)...)}
	}
	if d, ok := sinceDuration(s); ok {
		if d < 0 {
			return time.Time{}, bad("a duration counts back from now and cannot be negative; give 24h for the last day")
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		loc := time.Local
		if layout == time.RFC3339 {
			loc = time.UTC
		}
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			if t.After(now) {
				return time.Time{}, bad("that time is in the future (now is %s): no change is that recent", now.Format(time.RFC3339))
			}
			return t, nil
		}
	}
	return time.Time{}, bad("want a duration (24h, 90m, 7d) or a time (2026-05-01, 2026-05-01T14:30 or RFC 3339)")
}

// sinceDuration reads a duration as people write it: Go's (1h30m), with
// days (7d, 1.5d), blanks between number and unit, and a trailing "ago".
func sinceDuration(s string) (time.Duration, bool) {
	t := strings.ToLower(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.ToLower(s)), "ago")))
	t = strings.ReplaceAll(t, " ", "")
	if t == "" {
		return 0, false
	}
	if num, ok := strings.CutSuffix(t, "d"); ok {
		days, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsInf(days, 0) || math.IsNaN(days) || math.Abs(days) > 100000 {
			return 0, false
		}
		return time.Duration(days * float64(24*time.Hour)), true
	}
	d, err := time.ParseDuration(t)
	return d, err == nil
}

func runChangesList(_ context.Context, f *Factory, o *ChangesListOptions) error {
	since, err := parseSince(o.Since, f.Now())
	if err != nil {
		return err
	}
	store, err := f.Sessions()
	if err != nil {
		return err
	}
	filter := pipeline.ChangeFilter{Target: o.Target, Since: since}
	if o.Session != "" {
		if filter.SessionID, err = resolveSession(store, o.Session); err != nil {
			return err
		}
	}
	list, err := pipeline.ListChanges(store, filter)
	if err != nil {
		return err
	}
	rows := make([]ChangeRow, 0, len(list))
	for _, c := range list {
		rows = append(rows, changeRow(c))
	}
	if out := f.opts().Output; isData(out) {
		return WriteData(f.IO.Out, out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no changes")
		return nil
	}
	t := Table{Columns: []Column{{Header: "ID"}, {Header: "WHEN"}, {Header: "BY"}, {Header: "ACTION", Shrink: true},
		{Header: "TARGET", Shrink: true}, {Header: "UNDO"}, {Header: "SESSION", Wide: true}}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.ID, r.ExecutedAt.Local().Format("01-02 15:04"), orDash(r.ApprovedBy), r.Action,
			orDash(r.Target.Name), r.Undoable, r.SessionID})
	}
	return t.Write(f.IO.Out, f.opts().Output, f.IO.Width)
}

// NewCmdChangesShow builds `changes show`.
func NewCmdChangesShow(f *Factory, runF func(context.Context, string) error) *cobra.Command {
	c := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one change with a field-level diff of before and after (ID: an id or unique prefix)",
		Example: "  upgrade-agent changes show 5e1d07a2c9b3\n  upgrade-agent changes show 5e1d -o json",
		Args:    exactArgs("ID"),
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), args[0])
			}
			return runChangesShow(c.Context(), f, args[0])
		},
	}
	return withOutputs(c, "json", "yaml")
}

// ChangeDetail is `changes show -o json`: the list's row with the params,
// the objects before and after (as the server returned them) and their
// field-level diff.
type ChangeDetail struct {
	ChangeRow
	ProposedBy string              `json:"proposed_by" yaml:"proposed_by"`
	Params     json.RawMessage     `json:"params" yaml:"-"`
	Before     json.RawMessage     `json:"before" yaml:"-"`
	After      json.RawMessage     `json:"after" yaml:"-"`
	Diff       []actions.FieldDiff `json:"diff" yaml:"diff"`
}

func findChange(f *Factory, id string) (*actions.Change, error) {
	store, err := f.Sessions()
	if err != nil {
		return nil, err
	}
	if err := ambiguousChange(store, id); err != nil {
		return nil, err
	}
	c, err := pipeline.FindChange(store, id)
	if errors.Is(err, pipeline.ErrChangeNotFound) {
		return nil, &UsageError{Err: err}
	}
	return c, err
}

func runChangesShow(_ context.Context, f *Factory, id string) error {
	c, err := findChange(f, id)
	if err != nil {
		return err
	}
	d := ChangeDetail{ChangeRow: changeRow(*c), ProposedBy: c.ProposedBy, Params: c.Params, Before: orNull(c.Before),
		After: orNull(c.After), Diff: actions.Diff(c.Before, c.After)}
	if d.Diff == nil {
		d.Diff = []actions.FieldDiff{}
	}
	if out := f.opts().Output; isData(out) {
		return WriteData(f.IO.Out, out, d)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "Change:    %s\nSession:   %s\nAction:    %s\nTarget:    %s (id %s)\nExecuted:  %s\nApproved:  %s\nUndoable:  %s\n",
		c.ID, c.SessionID, c.Action, c.Target, orDash(c.Target.ID), c.ExecutedAt.Format(time.RFC3339), orDash(c.ApprovedBy), d.Undoable)
	if c.Undoes != "" {
		fmt.Fprintf(w, "Undoes:    %s\n", c.Undoes)
	}
	if c.UndoneBy != "" {
		fmt.Fprintf(w, "Undone by: %s\n", c.UndoneBy)
	}
	if c.TraceID != "" {
		fmt.Fprintf(w, "Trace:     %s\n", c.TraceID)
	}
	switch {
	case c.Target.Kind == "":
		fmt.Fprintln(w, "\nNo server object recorded: UpGrade cannot take this back.")
	case c.Before == nil:
		fmt.Fprintln(w, "\nCreated (there was nothing before).")
	case c.After == nil:
		fmt.Fprintln(w, "\nDeleted (nothing after).")
	}
	if len(d.Diff) > 0 && c.Before != nil && c.After != nil {
		fmt.Fprintln(w, "\nChanged fields (before -> after):")
		for _, x := range d.Diff {
			fmt.Fprintf(w, "  %s: %s -> %s\n", x.Path, actions.FmtValue(x.From), actions.FmtValue(x.To))
		}
	}
	return nil
}

// orNull is raw, or JSON null for none.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// ambiguousChange refuses an id prefix that starts more than one change
// id (none is the id itself), listing them so that the person can pick
// one: a bad input (exit 2).
func ambiguousChange(store checkpoint.Store, id string) error {
	id = strings.TrimSpace(id)
	if id == "" || strings.EqualFold(id, pipeline.LastChange) {
		return nil
	}
	all, err := pipeline.ListChanges(store, pipeline.ChangeFilter{})
	if err != nil {
		return err
	}
	var found []actions.Change
	for _, c := range all {
		if c.ID == id {
			return nil
		}
		if strings.HasPrefix(c.ID, id) {
			found = append(found, c)
		}
	}
	if len(found) < 2 {
		return nil
	}
	lines := make([]string, len(found))
	for i, c := range found {
		lines[i] = fmt.Sprintf("  %s  %s  %s %s", c.ID, c.ExecutedAt.Local().Format("01-02 15:04"), c.Action, orDash(c.Target.Name))
	}
	return Usagef("change id %q is ambiguous: it starts %d change ids; give more of one of them:\n%s", id, len(found), strings.Join(lines, "\n"))
}
