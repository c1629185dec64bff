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

// teamState is the store this process opened, once.
type teamState struct {
	pg *pgstore.Store
}

// pgStore opens the PostgreSQL store (once per process); nil without one.
func (f *Factory) pgStore() (*pgstore.Store, error) {
	o := f.opts()
	if o.Team.Store == "" {
		return nil, nil
	}
	if f.team.pg != nil {
		return f.team.pg, nil
	}
	s, err := pgstore.Open(context.Background(), o.Team.Store, pgstore.Options{Secrets: f.Secrets(), Now: f.Now})
	if err != nil {
		if errors.Is(err, pgstore.ErrSchemaNewer) || errors.Is(err, pgstore.ErrURL) {
			return nil, &UsageError{Err: err}
		}
		return nil, fmt.Errorf("%s", redact.String(err.Error(), f.Secrets()...))
	}
	f.team.pg = s
	return s, nil
}

// closeTeam ends the store's connection.
func (f *Factory) closeTeam() {
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
	return s, nil
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
	return audit.OpenFileLog(dir), nil
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

func (a *auditor) Audit(e audit.Entry) {
	a.Append(e)
}

// Append records e, stamped, and warns when it cannot.
func (a *auditor) Append(e audit.Entry) {
	now := time.Now
	if a.f.Now != nil {
		now = a.f.Now
	}
	e.Time = now().UTC()
	e.Actor = a.f.opts().Team.Actor
	e.Message = redact.String(e.Message, a.f.Secrets()...)
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
