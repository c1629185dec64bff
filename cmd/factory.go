package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/upgrade-agent/upgrade-agent/config"
	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/internal/tracing"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmspec"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// IOStreams are the standard streams of one run. Out carries only results;
// everything else (notices, progress, logs, errors) goes to ErrOut.
type IOStreams struct {
	In          io.Reader
	Out, ErrOut io.Writer

	StdinTTY, StdoutTTY, StderrTTY bool
	// Width is what a table may take: $COLUMNS, else the terminal's width;
	// 0 = no limit (stdout is not a terminal).
	Width int
}

// SystemIO is the process's own streams with terminal detection.
func SystemIO() *IOStreams {
	return &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		StdinTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		StdoutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		StderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		Width:     terminalWidth(os.Getenv, term.IsTerminal(int(os.Stdout.Fd()))),
	}
}

// GlobalOptions are the global settings after applying the precedence
// flag > environment > config file > default. Paths are absolute.
type GlobalOptions struct {
	// ConfigFile is the file that was read; "" when none.
	ConfigFile string
	// StateDir holds sessions, jobs and the embedded simulator's data. ""
	// when no default could be worked out (no HOME); StateDir() then fails.
	StateDir string

	UpgradeURL      string // "" = the embedded simulator
	UpgradeToken    string
	UpgradeTimeout  time.Duration
	ClientAPIKey    string
	ClientAPISecret string

	LLMSpec         string
	LLMBaseURL      string
	Model           string
	AzureAPIVersion string
	LLMTimeout      time.Duration

	// Team are the store, actor and approval_ttl settings (teams.go).
	Team TeamOptions

	// Trace is the absolute path of the span file, "" for none;
	// TraceContent records contents in the spans.
	Trace        string
	TraceContent bool

	Output  string // text, json or yaml
	Verbose bool
	NoColor bool

	// Config is the loaded file (empty when there was none), for the
	// settings that only exist there (replies, mcp_servers, ...).
	Config *config.Config
}

// Factory hands every command what it needs from the outside world. Opts
// is filled in by the root command before any command runs.
type Factory struct {
	IO     *IOStreams
	Getenv func(string) string
	Now    func() time.Time
	Opts   *GlobalOptions

	loggerOnce sync.Once
	logger     *slog.Logger

	// embedded is the simulator Upgrade started, if any (server_check.go).
	embedded *sim.Server

	team teamState // the opened store (teams.go)

	tracing *tracing.Provider // nil: tracing off (tracing.go)

	// actions are the agent's and the job runner's actions: the built-in
	// set unless a test gives its own (Actions).
	actions *actions.Registry
}

// Actions is the action set of this run: the one given with WithActions,
// else a copy of the built-in set, made on first need.
func (f *Factory) Actions() *actions.Registry {
	if f.actions == nil {
		f.actions = actions.Builtin()
	}
	return f.actions
}

// NewFactory builds a Factory over streams and an environment.
func NewFactory(streams *IOStreams, getenv func(string) string, opts ...FactoryOption) *Factory {
	f := &Factory{IO: streams, Getenv: getenv, Now: time.Now}
	for _, o := range opts {
		o(f)
	}
	return f
}

// FactoryOption gives a run what the command line cannot: a test's own
// action set.
type FactoryOption func(*Factory)

// WithActions runs the commands with the actions of reg instead of the
// built-in set.
func WithActions(reg *actions.Registry) FactoryOption {
	return func(f *Factory) { f.actions = reg }
}

// opts is Opts, or defaults when a command runs without the root (tests).
func (f *Factory) opts() *GlobalOptions {
	if f.Opts == nil {
		f.Opts = &GlobalOptions{Output: "text", Config: &config.Config{}}
	}
	return f.Opts
}

// Secrets are the values that must never be printed or logged.
func (f *Factory) Secrets() []string {
	o := f.opts()
	var s []string
	for _, v := range []string{o.UpgradeToken, o.ClientAPISecret, f.Getenv("OPENAI_API_KEY"), storePassword(o)} {
		if v != "" {
			s = append(s, v)
		}
	}
	return s
}

// Logger is the stderr logger: warnings only, everything with -v. Known
// secrets and credential-looking attributes are redacted.
func (f *Factory) Logger() *slog.Logger {
	f.loggerOnce.Do(func() {
		f.logger = newLogger(f.IO.ErrOut, f.opts().Verbose, f.Secrets())
	})
	return f.logger
}

// StateDir returns the state dir, created 0700 when missing.
func (f *Factory) StateDir() (string, error) {
	dir := f.opts().StateDir
	if dir == "" {
		return "", &UsageError{Err: errors.New("no state dir: set UPGRADE_AGENT_HOME or --state-dir (HOME is not set)")}
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("create state dir: %w", err)
		}
	} else if err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return dir, nil
}

// Upgrade returns a client for the configured UpGrade server. Without
// UpgradeURL it starts the embedded simulator, persisted in the state dir,
// and says so on stderr. Call cleanup when done.
func (f *Factory) Upgrade(ctx context.Context) (*upgrade.Client, func(), error) {
	o := f.opts()
	cfg := upgrade.Config{
		BaseURL:         o.UpgradeURL,
		Token:           o.UpgradeToken,
		Timeout:         o.UpgradeTimeout,
		ClientAPIKey:    o.ClientAPIKey,
		ClientAPISecret: o.ClientAPISecret,
		Logger:          f.Logger(),
	}
	cleanup := func() {}
	if cfg.BaseURL == "" {
		srv, dir, err := f.startSimulator()
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(f.IO.ErrOut, "upgrade-agent: using the embedded UpGrade simulator (state in %s); set UPGRADE_API_URL for a real server\n", dir)
		f.embedded = srv
		// The embedded simulator has login switched off; a token meant
		// for a real server has no business there.
		cfg.BaseURL, cfg.Token = srv.URL(), ""
		cleanup = func() {
			if err := srv.Close(); err != nil {
				f.Logger().Warn("closing the embedded simulator", "err", err)
			}
		}
	}
	c, err := upgrade.New(cfg)
	if err != nil {
		cleanup()
		// New only refuses settings (URL, timeout, client keys): bad input.
		return nil, nil, &UsageError{Err: err}
	}
	return c, cleanup, nil
}

func (f *Factory) startSimulator() (*sim.Server, string, error) {
	o := f.opts()
	state, err := f.StateDir()
	if err != nil {
		return nil, "", err
	}
	dir := filepath.Join(state, "sim")
	opts := sim.Options{DataFile: filepath.Join(dir, "data.json"), Now: f.Now}
	if o.Config != nil {
		if o.Config.SimSeed != nil {
			opts.Seed = *o.Config.SimSeed
		}
		if p := o.Config.ContextMetadata; p != "" {
			meta, err := sim.LoadMetadataFile(p)
			if err != nil {
				return nil, "", &UsageError{Err: fmt.Errorf("config context_metadata: %w", err)}
			}
			opts.Metadata = meta
		}
	}
	srv, err := sim.Start(opts)
	if err != nil {
		return nil, "", fmt.Errorf("start the embedded UpGrade simulator: %w", err)
	}
	return srv, dir, nil
}

// LLM returns the client the --llm spec names. The API key comes only from
// OPENAI_API_KEY. Close the Closer when done (it writes a recorded cassette
// and checks that a script was used up).
func (f *Factory) LLM() (llm.Client, io.Closer, error) {
	o := f.opts()
	c, closer, err := llmspec.FromSpec(o.LLMSpec, llm.Options{
		BaseURL:         o.LLMBaseURL,
		APIKey:          f.Getenv("OPENAI_API_KEY"),
		Model:           o.Model,
		AzureAPIVersion: o.AzureAPIVersion,
		Timeout:         o.LLMTimeout,
		Logger:          f.Logger(),
	})
	if err != nil {
		// Everything FromSpec can refuse is the caller's input: a missing
		// key, a bad base URL, an unreadable or invalid script or cassette.
		return nil, nil, &UsageError{Err: err}
	}
	return c, closer, nil
}

func newLogger(w io.Writer, verbose bool, secrets []string) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level:       level,
		ReplaceAttr: redact.New(secrets...).Attr,
	}))
}
