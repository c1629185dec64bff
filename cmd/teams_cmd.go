package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/internal/atomicfile"
)

func newCmdSessionsList(f *Factory) *cobra.Command {
	var pending bool
	c := withOutputs(&cobra.Command{
		Use: "list", Short: "List sessions, most recent first", Args: noArgs,
		Example: "  upgrade-agent sessions list\n  upgrade-agent sessions list -o wide\n  upgrade-agent sessions list -o json\n  upgrade-agent sessions list --pending",
		Long: `List the stored sessions, most recent first. With --pending, the approvals
inbox: the sessions awaiting a confirmation (the whole team's with a shared
store), with who proposed what and when it expires; answer one with
upgrade-agent resume SESSION --answer yes|no.`,
		RunE: func(c *cobra.Command, _ []string) error {
			if pending {
				return runSessionsPending(c.Context(), f)
			}
			return runSessionsList(c.Context(), f)
		},
	}, "wide", "json", "yaml")
	c.Flags().BoolVar(&pending, "pending", false, "only sessions awaiting a confirmation: the approvals inbox")
	return c
}

// PendingConfirmation is the full confirmation of an inbox row.
type PendingConfirmation struct {
	ID          string          `json:"id" yaml:"id"`
	Action      string          `json:"action" yaml:"action"`
	Params      json.RawMessage `json:"params" yaml:"-"`
	ParamsYAML  any             `json:"-" yaml:"params"`
	ParamsHash  string          `json:"params_hash" yaml:"params_hash"`
	Message     string          `json:"message" yaml:"message"`
	Destructive bool            `json:"destructive" yaml:"destructive"`
}

// PendingRow is one confirmation of `sessions list --pending`.
type PendingRow struct {
	Session string `json:"session" yaml:"session"`
	Action  string `json:"action" yaml:"action"`
	Target  string `json:"target" yaml:"target"`
	// TargetID is the target's id when Target is its name.
	TargetID    string `json:"target_id,omitempty" yaml:"target_id,omitempty"`
	Destructive bool   `json:"destructive" yaml:"destructive"`
	ProposedBy  string `json:"proposed_by" yaml:"proposed_by"`
	// ProposedByDBUser is the database role that recorded the proposal
	// (PostgreSQL store only).
	ProposedByDBUser string     `json:"proposed_by_db_user,omitempty" yaml:"proposed_by_db_user,omitempty"`
	ProposedAt       time.Time  `json:"proposed_at" yaml:"proposed_at"`
	ExpiresAt        *time.Time `json:"expires_at" yaml:"expires_at"`
	Expired          bool       `json:"expired" yaml:"expired"`
	// Answering: a machine is executing the approved write right now (or
	// stopped in the middle of it: resume reconciles it).
	Answering bool                `json:"answering" yaml:"answering"`
	Confirm   PendingConfirmation `json:"confirmation" yaml:"confirmation"`
}

func runSessionsPending(_ context.Context, f *Factory) error {
	store, err := f.Sessions()
	if err != nil {
		return err
	}
	list, err := store.List()
	if err != nil {
		return err
	}
	log, err := f.AuditLog()
	if err != nil {
		return err
	}
	proposals := map[string]audit.Entry{}
	if entries, err := log.Read(audit.Filter{}); err == nil {
		for _, e := range entries {
			if e.Event == audit.Proposed && e.ConfirmationID != "" {
				proposals[e.ConfirmationID] = e
			}
		}
	} else {
		fmt.Fprintf(f.IO.ErrOut, "warning: %v\n", err)
	}
	ttl := f.opts().Team.ApprovalTTL
	now := f.Now().UTC()
	rows := []PendingRow{}
	for _, s := range list {
		if s.Status != checkpoint.StatusAwaitingConfirmation && s.Status != checkpoint.StatusRunning {
			continue
		}
		cp, err := store.Load(s.ID)
		if err != nil || cp.Interrupt == nil || cp.Interrupt.Confirmation == nil {
			continue // changed meanwhile
		}
		ic, c := cp.Interrupt, cp.Interrupt.Confirmation
		r := PendingRow{Session: s.ID, Action: c.Action, Destructive: c.Destructive, ProposedAt: ic.CreatedAt.UTC(),
			Confirm: PendingConfirmation{ID: ic.ID, Action: c.Action, Params: c.Params, ParamsHash: c.ParamsHash, Message: c.Message, Destructive: c.Destructive}}
		var p any
		if json.Unmarshal(c.Params, &p) == nil {
			r.Confirm.ParamsYAML = p
		}
		r.Answering = cp.Status == checkpoint.StatusRunning
		r.Target, r.TargetID = c.Target, c.TargetID
		if r.Target == "" { // proposed before targets were kept
			r.Target = audit.TargetOf(c.Params)
		}
		if e, ok := proposals[ic.ID]; ok {
			r.ProposedBy, r.ProposedByDBUser = e.Actor, e.DBUser
			if e.Target != "" {
				r.Target, r.TargetID = e.Target, e.TargetID
			}
		}
		switch {
		case ic.ExpiresAt != nil: // fixed at proposal: the same on every machine
			exp := ic.ExpiresAt.UTC()
			r.ExpiresAt, r.Expired = &exp, now.After(exp)
		case ttl > 0: // proposed before expires_at existed
			exp := r.ProposedAt.Add(ttl)
			r.ExpiresAt, r.Expired = &exp, now.After(exp)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].ProposedAt.After(rows[j].ProposedAt) }) // newest first
	if out := f.opts().Output; isData(out) {
		return WriteData(f.IO.Out, out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no confirmation is awaiting an answer")
		return nil
	}
	t := Table{Columns: []Column{{Header: "SESSION"}, {Header: "ACTION"}, {Header: "TARGET", Shrink: true}, {Header: "TARGET ID", Wide: true},
		{Header: "DESTRUCTIVE", Wide: true}, {Header: "PROPOSED BY", Shrink: true}, {Header: "PROPOSED AT", Wide: true}, {Header: "EXPIRES"}}}
	for _, r := range rows {
		exp := "never"
		if r.ExpiresAt != nil {
			exp = r.ExpiresAt.Local().Format("2006-01-02 15:04")
			if r.Expired {
				exp = "expired"
			}
		}
		if r.Answering {
			exp = "answering" // being executed: its expiry no longer matters
		}
		by := r.ProposedBy
		if by == "" {
			by = "-"
		}
		t.Rows = append(t.Rows, []string{r.Session, r.Action, r.Target, dash(r.TargetID), yesNo(r.Destructive), by,
			r.ProposedAt.Local().Format("2006-01-02 15:04"), exp})
	}
	return t.Write(f.IO.Out, f.opts().Output, f.IO.Width)
}

// ProposalRef is a confirmation as its proposed entry in the trail names
// it: the target by name (a flag by key) as it was then, and who proposed.
type ProposalRef struct {
	Target     string `json:"target,omitempty" yaml:"target,omitempty"`
	TargetID   string `json:"target_id,omitempty" yaml:"target_id,omitempty"`
	ProposedBy string `json:"proposed_by,omitempty" yaml:"proposed_by,omitempty"`
}

// proposalOf reads the trail's proposed entry of ic (nil when the trail
// has none: an imported session, or no trail).
func proposalOf(f *Factory, sessionID string, ic *checkpoint.Interrupt) *ProposalRef {
	p := &ProposalRef{Target: ic.Confirmation.Target, TargetID: ic.Confirmation.TargetID}
	if log, err := f.AuditLog(); err == nil {
		if entries, err := log.Read(audit.Filter{SessionID: sessionID}); err == nil {
			for _, e := range entries {
				if e.Event == audit.Proposed && e.ConfirmationID == ic.ID {
					p.ProposedBy = e.Actor
					if p.Target == "" {
						p.Target, p.TargetID = e.Target, e.TargetID
					}
				}
			}
		}
	}
	if *p == (ProposalRef{}) {
		return nil
	}
	return p
}

// describe is the " on TARGET, proposed by X, expires T" of sessions show.
func (p *ProposalRef) describe(ic *checkpoint.Interrupt) string {
	var s string
	if p != nil && p.Target != "" {
		s += " on " + p.Target
	}
	if p != nil && p.ProposedBy != "" {
		s += ", proposed by " + p.ProposedBy
	}
	if ic.ExpiresAt != nil {
		s += ", expires " + ic.ExpiresAt.Local().Format("2006-01-02 15:04")
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newCmdSessionsExport(f *Factory) *cobra.Command {
	var file string
	c := withOutputs(&cobra.Command{
		Use: "export SESSION", Short: "Write a session as one checkpoint file (SESSION: its id or a unique prefix)", Args: exactArgs("SESSION"),
		Example: "  upgrade-agent sessions export 3f2a9c0d1e4b > session.json\n  upgrade-agent sessions export 3f2a --file session.json",
		Long: `Write the session's latest checkpoint, verified, to stdout or --file: the same
JSON as the file store keeps. "sessions import FILE" or "resume FILE" takes it
in, in any store.`,
		RunE: func(c *cobra.Command, args []string) error { return runSessionsExport(c.Context(), f, args[0], file) },
	})
	c.Flags().StringVarP(&file, "file", "f", "", "write to this `file` (0600) instead of stdout")
	return c
}

func runSessionsExport(_ context.Context, f *Factory, id, file string) error {
	store, err := f.Sessions()
	if err != nil {
		return err
	}
	if id, err = resolveSession(store, id); err != nil {
		return err
	}
	data, err := store.Export(id)
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
			return &UsageError{Err: err}
		}
		return err
	}
	if file == "" {
		_, err := rawWriter(f.IO.Out).Write(data) // the file's exact bytes
		return err
	}
	if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}
	if err := atomicfile.WriteFile(file, data, 0o600); err != nil {
		return fmt.Errorf("export session %s: %w", id, err)
	}
	fmt.Fprintf(f.IO.ErrOut, "exported session %s to %s\n", id, file)
	return nil
}

func newCmdSessionsImport(f *Factory) *cobra.Command {
	return withOutputs(&cobra.Command{
		Use: "import FILE", Short: "Take a checkpoint file into the store", Args: exactArgs("FILE"),
		Example: "  upgrade-agent sessions import session.json\n  upgrade-agent --store postgres://agent@db.example/upgrade sessions import session.json",
		Long: `Verify a checkpoint file (say, a CI artifact or "sessions export") and store it
under its session id. A stored session with other content under that id is
never replaced (exit 2).`,
		RunE: func(c *cobra.Command, args []string) error { return runSessionsImport(c.Context(), f, args[0]) },
	})
}

func runSessionsImport(_ context.Context, f *Factory, path string) error {
	store, err := f.Sessions()
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err != nil {
		return Usagef("import: %v", err)
	}
	id, err := store.Import(path)
	if err != nil {
		if errors.Is(err, checkpoint.ErrExists) || errors.Is(err, checkpoint.ErrCorrupt) {
			return &UsageError{Err: err}
		}
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "imported %s as session %s\n", path, id)
	fmt.Fprintln(f.IO.Out, id)
	return nil
}

// NewCmdAudit builds `audit`.
func NewCmdAudit(f *Factory) *cobra.Command {
	var o struct {
		session, actor string
		since          time.Duration
	}
	c := withOutputs(&cobra.Command{
		Use:   "audit",
		Short: "The audit trail: who proposed, approved and executed what",
		Long: `Print the audit trail of the store, oldest first: every confirmation proposed,
approved, denied or expired, every write executed (with its outcome and what
the server answered), every job started, finished or cancelled. The target is
named as it was when the entry was written (a flag by its key); -o wide and
JSON add its id. The actor is a label (UPGRADE_AGENT_ACTOR); with a PostgreSQL
store, DB USER is the role the database authenticated. Text that is not
printable as it stands (a NUL, bytes that are not UTF-8) is stored and shown
escaped (\x00, \xff, and \\ for a backslash); --actor and --session take it
as shown.`,
		Example: `  upgrade-agent audit --session 3f2a9c1b7d0e
  upgrade-agent audit --session 3f2a
  upgrade-agent audit --since 24h --actor alice@ci -o json
  upgrade-agent audit verify`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.since < 0 {
				return Usagef("--since must not be negative")
			}
			for name, v := range map[string]string{"--session": o.session, "--actor": o.actor} {
				if err := plainText(name, v); err != nil {
					return err
				}
			}
			flt := audit.Filter{SessionID: o.session, Actor: o.actor}
			if o.since > 0 {
				flt.Since = f.Now().UTC().Add(-o.since)
			}
			return runAudit(c.Context(), f, flt)
		},
	}, "wide", "json", "yaml")
	c.Flags().StringVar(&o.session, "session", "", "only this session's entries (its `id` or a unique prefix)")
	c.Flags().StringVar(&o.actor, "actor", "", "only entries of this actor")
	c.Flags().DurationVar(&o.since, "since", 0, "only entries of the last `duration` (e.g. 24h)")
	c.AddCommand(newCmdAuditVerify(f))
	return c
}

// plainText refuses a filter value that no stored entry can hold as it
// stands: the trail keeps such text escaped, and is searched as shown.
func plainText(flag, v string) error {
	if utf8.ValidString(v) && !strings.Contains(v, "\x00") {
		return nil
	}
	return Usagef("%s: %q holds a NUL or bytes that are not UTF-8; the trail keeps such text escaped: give it as audit shows it (%s)", flag, v, audit.Escape(v))
}

func newCmdAuditVerify(f *Factory) *cobra.Command {
	return withOutputs(&cobra.Command{
		Use:   "verify",
		Short: "Check the audit trail's hash chain",
		Long: `Walk the whole audit trail and check its hash chain: each entry's own hash,
and the hash of the entry before it that each one names. The first entry that
was changed, removed or put out of order after it was written is reported,
and the command exits 2 (as for a corrupt checkpoint). A sound trail prints how
many entries it holds and the hash of the last one: keep that hash, since an
entry removed from the very end is only seen against an earlier head.`,
		Example: "  upgrade-agent audit verify\n  upgrade-agent audit verify -o json",
		Args:    noArgs,
		RunE:    func(c *cobra.Command, _ []string) error { return runAuditVerify(c.Context(), f) },
	}, "json", "yaml")
}

func runAuditVerify(_ context.Context, f *Factory) error {
	log, err := f.AuditLog()
	if err != nil {
		return err
	}
	r, err := log.Verify()
	if err != nil {
		if errors.Is(err, audit.ErrCorrupt) {
			return &UsageError{Err: err}
		}
		return err
	}
	broken := func() error {
		p := r.Problem
		return &UsageError{Err: fmt.Errorf("audit trail broken at %s (entry %d, %s): %s; %d entries before it are sound",
			p.Where, p.N, p.Kind, p.Reason, r.Entries)}
	}
	if out := f.opts().Output; isData(out) {
		if err := WriteData(f.IO.Out, out, r); err != nil {
			return err
		}
		if r.Problem != nil {
			return broken()
		}
		return nil
	}
	if r.Problem != nil {
		return broken()
	}
	fmt.Fprintf(f.IO.Out, "audit trail verified: %d entries", r.Entries)
	if r.Legacy > 0 {
		fmt.Fprintf(f.IO.Out, " (and %d written before the trail was chained)", r.Legacy)
	}
	if r.Head != "" {
		fmt.Fprintf(f.IO.Out, ", head %s", r.Head)
	}
	fmt.Fprintln(f.IO.Out)
	return nil
}

func runAudit(_ context.Context, f *Factory, flt audit.Filter) error {
	log, err := f.AuditLog()
	if err != nil {
		return err
	}
	if flt.SessionID != "" {
		if flt.SessionID, err = resolveAuditSession(f, log, flt.SessionID); err != nil {
			return err
		}
	}
	entries, err := log.Read(flt)
	if err != nil {
		if errors.Is(err, audit.ErrCorrupt) {
			return &UsageError{Err: err}
		}
		return err
	}
	if entries == nil {
		entries = []audit.Entry{}
	}
	if out := f.opts().Output; isData(out) {
		return WriteData(f.IO.Out, out, entries)
	}
	if len(entries) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no audit entries")
		return nil
	}
	t := Table{Columns: []Column{{Header: "TIME"}, {Header: "EVENT"}, {Header: "ACTOR", Shrink: true}, {Header: "DB USER", Shrink: true, Wide: true},
		{Header: "SESSION", Wide: true}, {Header: "CONFIRMATION", Wide: true}, {Header: "ACTION"}, {Header: "TARGET", Shrink: true},
		{Header: "TARGET ID", Wide: true}, {Header: "DETAIL", Shrink: true}}}
	for _, e := range entries {
		detail := e.Outcome
		if len(e.Answer) > 0 {
			detail = strings.TrimSpace(detail + " " + string(e.Answer))
		}
		if e.Message != "" {
			detail = strings.TrimSpace(detail + " " + e.Message)
		}
		t.Rows = append(t.Rows, []string{e.Time.Local().Format("2006-01-02 15:04:05"), e.Event, e.Actor, dash(e.DBUser), e.SessionID,
			e.ConfirmationID, e.Action, e.Target, dash(e.TargetID), detail})
	}
	return t.Write(f.IO.Out, f.opts().Output, f.IO.Width)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resolveAuditSession is the session id ref names: a whole id or a unique
// prefix, of a session in the store or one the trail names (a session
// removed since keeps its entries). Unknown is exit 2, as for resume.
func resolveAuditSession(f *Factory, log audit.Log, ref string) (string, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if store, err := f.Sessions(); err == nil {
		if list, err := store.List(); err == nil {
			for _, s := range list {
				add(s.ID)
			}
		}
	}
	all, err := log.Read(audit.Filter{})
	if err != nil {
		if errors.Is(err, audit.ErrCorrupt) {
			return "", &UsageError{Err: err}
		}
		return "", err
	}
	for _, e := range all {
		add(e.SessionID)
	}
	return resolveIDPrefix("session", "sessions list", ref, ids, checkpoint.ErrNotFound)
}

// auditJobCancelled records a `jobs cancel`.
func auditJobCancelled(f *Factory, jobID, sessionID, action string, params json.RawMessage, msg string) {
	a, err := f.Auditor()
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "warning: audit trail: %v\n", err)
		return
	}
	a.Append(audit.Entry{Event: audit.JobCancelled, SessionID: sessionID, JobID: jobID, Action: action,
		Target: audit.TargetOf(params), Message: msg})
}
