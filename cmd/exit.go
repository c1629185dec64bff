package cmd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// ExitError makes a command end with a chosen code. An ExitError with a nil
// Err is silent: ask and resume print their result themselves and then use
// it to exit 10, 11 or 12.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode makes ExitError an exitcode.Coder.
func (e *ExitError) ExitCode() int { return e.Code }

// UsageError is bad input a person must fix before running again: an
// unknown context, an invalid setting, a bad file. It exits 2.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }
func (e *UsageError) ExitCode() int { return exitcode.Usage }

// Usagef builds a *UsageError from a format.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// FlagError is a command line that cobra could not take: an unknown flag or
// command, a bad flag value, the wrong number of arguments. Besides exit 2,
// it earns the "Run '... --help' for usage." hint.
type FlagError struct {
	Err     error
	CmdPath string // the command the line was meant for, for the hint
}

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }
func (e *FlagError) ExitCode() int { return exitcode.Usage }

// ExitCode is the exit code of an error: exitcode.Code, the one mapping
// shared with the scenario runner, decides, after the team store's
// refusals (which only the CLI meets).
func ExitCode(err error) int {
	if c, _ := storeRefusal(err); c != 0 {
		return c
	}
	return exitcode.Code("", err)
}

// storeRefusal maps what PostgreSQL answers a team store that it will not
// serve to an exit code and what to do about it (0, "" for anything else):
// a refused login or a missing grant is refused credentials (3), a
// database that does not exist is a setting to fix (2).
func storeRefusal(err error) (int, string) {
	if err == nil {
		return 0, ""
	}
	// The store redacts its errors (they may quote the URL), which keeps
	// the text and drops pgx's types: the SQLSTATE is read from the text.
	code := ""
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		code = pe.Code
	} else if m := sqlState.Get().FindStringSubmatch(err.Error()); m != nil {
		code = m[1]
	}
	switch {
	case code != "":
		switch code {
		case "28P01", "28000":
			return exitcode.Auth, "the team store refused the login: check the user and password of the store URL"
		case "42501":
			return exitcode.Auth, "the store's role lacks a privilege: if the schema does not exist yet, run any command once as the database owner (it creates the tables), then grant the app role as docs/teams.md shows"
		case "3D000":
			return exitcode.Usage, "the database named in the store URL does not exist: create it as docs/teams.md shows"
		}
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return 0, "the PostgreSQL server offers no TLS: a local cluster needs sslmode=disable (or prefer) in the store URL; keep sslmode=require for a managed one"
	}
	return 0, ""
}

// sqlState is compiled on first need: nothing is computed at init.
var sqlState = lazyre.Of(`\(SQLSTATE ([0-9A-Z]{5})\)`)

// storeSource names where the store URL came from, for a hint: the
// config file, UPGRADE_AGENT_STORE or --store.
func storeSource(o *GlobalOptions, getenv func(string) string) string {
	if o == nil || o.Team.Store == "" {
		return ""
	}
	switch {
	case getenv("UPGRADE_AGENT_STORE") == o.Team.Store:
		return "UPGRADE_AGENT_STORE"
	case o.Config != nil && o.Config.Store == o.Team.Store:
		return "config " + o.ConfigFile + " (store)"
	}
	return "--store"
}

const (
	upgradeAuthHint = "UpGrade refused the credentials: set UPGRADE_API_TOKEN (or --upgrade-token) to a valid admin token"
	llmAuthHint     = "the LLM provider refused the API key: check OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint)"
)

// authHint says what to set when a server refused the credentials (exit 3).
func authHint(err error) string {
	switch {
	case upgrade.CategoryOf(err) == upgrade.CategoryAuth:
		return upgradeAuthHint
	case llm.KindOf(err) == llm.KindAuth:
		return llmAuthHint
	}
	return ""
}
