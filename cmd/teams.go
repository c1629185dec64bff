package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/config"
	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/store/pgstore"
)

// DefaultApprovalTTL is how long a confirmation may be approved unless
// approval_ttl says otherwise.
const DefaultApprovalTTL = 168 * time.Hour

// TeamOptions are the settings of docs/teams.md.
type TeamOptions struct {
	// Store is "" (files in the state dir) or a postgres:// URL. It may
	// hold a password: never print it (storePassword is a secret).
	Store string
	// Actor labels audit entries: UPGRADE_AGENT_ACTOR, config actor, else
	// USER@hostname.
	Actor string
	// ApprovalTTL: 0 never expires.
	ApprovalTTL time.Duration
}

// resolveTeam fills o.Team from the store setting, the environment and the
// config file.
func resolveTeam(o *GlobalOptions, store setting, getenv func(string) string, bad func(setting, string, ...any) error) error {
	if store.value != "" && !config.ValidStore(store.value) {
		return bad(store, "must be empty (files in the state dir) or a postgres:// or postgresql:// URL")
	}
	o.Team.Store = store.value
	cfg := o.Config
	o.Team.Actor = getenv("UPGRADE_AGENT_ACTOR")
	if o.Team.Actor == "" && cfg != nil {
		o.Team.Actor = cfg.Actor
	}
	if o.Team.Actor == "" {
		o.Team.Actor = defaultActor(getenv)
	}
	o.Team.ApprovalTTL = DefaultApprovalTTL
	if cfg != nil && cfg.ApprovalTTL != nil {
		o.Team.ApprovalTTL = *cfg.ApprovalTTL
	}
	return nil
}

// defaultActor is USER@hostname.
func defaultActor(getenv func(string) string) string {
	name := getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	return name + "@" + host
}

// storePassword is the store URL's password: a secret like any other.
func storePassword(o *GlobalOptions) string {
	if o == nil || o.Team.Store == "" {
		return ""
	}
	return pgstore.Password(o.Team.Store)
}

// teamState is the store and trail this process opened, once.
type teamState struct {
	pg      *pgstore.Store
	pgErr   error         // the early open's failure
	pgOpen  chan struct{} // closed when the early open has ended; nil when none started
	fileLog *audit.FileLog
	files   *checkpoint.FileStore
}

// openStoreEarly starts connecting to the PostgreSQL store, when one is
// configured, in the background: a connection is a server process and a
// scram handshake (about 20 ms on the two-core machine, mostly waiting), so
// a turn overlaps it with the rest of its set-up. pgStore waits for it.
func (f *Factory) openStoreEarly() {
	if f.opts().Team.Store == "" || f.team.pg != nil || f.team.pgOpen != nil {
		return
	}
	done := make(chan struct{})
	f.team.pgOpen = done
	go func() {
		defer close(done)
		f.team.pg, f.team.pgErr = f.openPG()
	}()
}

// pgStore opens the PostgreSQL store (once per process); nil without one.
func (f *Factory) pgStore() (*pgstore.Store, error) {
	o := f.opts()
	if o.Team.Store == "" {
		return nil, nil
	}
	if err := f.awaitEarlyOpen(); err != nil {
		return nil, err
	}
	if f.team.pg != nil {
		return f.team.pg, nil
	}
	s, err := f.openPG()
	if err != nil {
		return nil, err
	}
	f.team.pg = s
	return s, nil
}

// awaitEarlyOpen waits for openStoreEarly's connection, when one was
// started, and returns its failure once (the next pgStore tries again).
func (f *Factory) awaitEarlyOpen() error {
	if f.team.pgOpen == nil {
		return nil
	}
	<-f.team.pgOpen
	err := f.team.pgErr
	f.team.pgOpen, f.team.pgErr = nil, nil
	return err
}

// openPG connects to the configured PostgreSQL store.
func (f *Factory) openPG() (*pgstore.Store, error) {
	o := f.opts()
	write, margin := writeWindow(o.UpgradeTimeout)
	s, err := pgstore.Open(context.Background(), o.Team.Store, pgstore.Options{Secrets: f.Secrets(), Now: f.Now,
		WriteDeadline: write, LeaseMargin: margin,
		OnWait: func(holder string, until time.Time) {
			fmt.Fprintf(f.IO.ErrOut, "waiting until %s: a write to UpGrade announced by %s may still land; the session is taken over once it no longer can\n",
				until.Local().Format("15:04:05"), holder)
		}})
	if err != nil {
		if errors.Is(err, pgstore.ErrSchemaNewer) || errors.Is(err, pgstore.ErrURL) {
			return nil, &UsageError{Err: err}
		}
		return nil, fmt.Errorf("%s", redact.String(err.Error(), f.Secrets()...))
	}
	return s, nil
}

// writeWindow is the deadline of a write to UpGrade and the margin after it
// in which a request already sent may still land, from the per-request
// timeout: two attempts' worth, and one more timeout (docs/teams.md).
func writeWindow(timeout time.Duration) (write, margin time.Duration) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return 2 * timeout, timeout
}

// closeTeam stores what the trail still holds back and ends the store's
// connection.
func (f *Factory) closeTeam() {
	_ = f.awaitEarlyOpen() // an early open nobody waited for; its failure was nobody's concern
	var staged error
	if f.team.fileLog != nil {
		staged = f.team.fileLog.Flush()
	}
	if f.team.pg != nil {
		staged = f.team.pg.Audit().Flush()
	}
	if staged != nil {
		fmt.Fprintf(f.IO.ErrOut, "warning: audit trail: %s\n", redact.String(staged.Error(), f.Secrets()...))
	}
	if f.team.pg != nil {
		_ = f.team.pg.Close()
		f.team.pg = nil
	}
}

// Sessions opens the session store: the team's PostgreSQL store when one is
// configured, else the files in the state dir. It refuses to write any of
// the secrets this process knows.
func (f *Factory) Sessions() (checkpoint.SessionStore, error) {
	pg, err := f.pgStore()
	if err != nil {
		return nil, err
	}
	if pg != nil {
		return pg, nil
	}
	return f.fileSessions()
}

func (f *Factory) fileSessions() (*checkpoint.FileStore, error) {
	if f.team.files != nil {
		return f.team.files, nil
	}
	dir, err := f.StateDir()
	if err != nil {
		return nil, err
	}
	s, err := checkpoint.OpenFileStore(dir)
	if err != nil {
		return nil, err
	}
	s.Secrets = f.Secrets()
	if f.Now != nil {
		s.Now = f.Now
	}
	s.Ahead = f.fileTrail(dir).FlushSession
	f.team.files = s
	return s, nil
}

// fileTrail is the file store's trail, one per process: the session store
// stores what it holds back (Ahead).
func (f *Factory) fileTrail(dir string) *audit.FileLog {
	if f.team.fileLog == nil {
		f.team.fileLog = audit.OpenFileLog(dir, f.Now)
	}
	return f.team.fileLog
}

// AuditLog is the audit trail of the configured store.
func (f *Factory) AuditLog() (audit.Log, error) {
	pg, err := f.pgStore()
	if err != nil {
		return nil, err
	}
	if pg != nil {
		return pg.Audit(), nil
	}
	dir, err := f.StateDir()
	if err != nil {
		return nil, err
	}
	return f.fileTrail(dir), nil
}

// auditor stamps entries with the time and the actor and appends them; a
// failed append is a warning (the decision itself stands, see docs/teams.md).
type auditor struct {
	f   *Factory
	log audit.Log
}

// Auditor is the pipeline's hook into the audit trail.
func (f *Factory) Auditor() (*auditor, error) {
	l, err := f.AuditLog()
	if err != nil {
		return nil, err
	}
	return &auditor{f: f, log: l}, nil
}

// Audit records e. An approval is held back and stored by the checkpoint
// save that follows it, before the approved write starts (in the same
// transaction, with PostgreSQL): when it cannot be stored, the save fails
// and nothing runs.
func (a *auditor) Audit(e audit.Entry) {
	if ah, ok := a.log.(audit.Ahead); ok && e.Event == audit.Approved && e.SessionID != "" {
		ah.Stage(a.stamp(e))
		return
	}
	a.Append(e)
}

// stamp fills in the time (the database restamps it), the actor, and
// redacts the message.
func (a *auditor) stamp(e audit.Entry) audit.Entry {
	now := time.Now
	if a.f.Now != nil {
		now = a.f.Now
	}
	e.Time = now().UTC()
	e.Actor = a.f.opts().Team.Actor
	e.Message = redact.String(e.Message, a.f.Secrets()...)
	return e
}

// Append records e, stamped, and warns when it cannot.
func (a *auditor) Append(e audit.Entry) {
	e = a.stamp(e)
	if err := a.log.Append(e); err != nil {
		fmt.Fprintf(a.f.IO.ErrOut, "warning: audit trail: %s\n", redact.String(err.Error(), a.f.Secrets()...))
	}
}

// needNamedSession refuses to pick "the latest session" in a shared store,
// where the latest may be a colleague's: the person names it (the inbox
// lists them), as one names the pull request one approves in Atlantis.
func needNamedSession(f *Factory, what string) error {
	if f.opts().Team.Store == "" {
		return nil
	}
	return Usagef("%s needs a session id with a shared store (the most recent session may be someone else's); see upgrade-agent sessions list --pending", what)
}
