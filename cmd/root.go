package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/upgrade-agent/upgrade-agent/config"
	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/internal/redact"
)

// testCommands are hidden commands that only test binaries add (from
// their init functions), to drive the root's error handling.
var testCommands []func(*Factory) *cobra.Command

// traverseRunHooks sets cobra.EnableTraverseRunHooks once, when the first
// root is built rather than at package init: the root's PersistentPreRunE
// resolves the global settings, and a command with a persistent hook of
// its own must not silently skip it.
var traverseRunHooks sync.Once

func enableTraverseRunHooks() {
	traverseRunHooks.Do(func() { cobra.EnableTraverseRunHooks = true })
}

// annotationNoGlobals marks commands that must work whatever the settings
// say (completion scripts, help): the globals are not resolved for them.
const annotationNoGlobals = "upgrade-agent/no-globals"

// Execute runs the command line of this process and returns its exit code.
func Execute(opts ...FactoryOption) int {
	args := os.Args[1:]
	ctx := context.Background()
	// A quick command (version, completion) runs without the signal
	// handling: it never waits, and setting it up (a goroutine and the
	// runtime's signal delivery) is a good part of its start-up.
	if tc := selectedCommand(args); tc == nil || !tc.quick {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		go func() {
			// After the first signal, the next one kills the process the
			// usual way instead of being swallowed.
			<-ctx.Done()
			stop()
		}()
	}
	return Run(ctx, args, SystemIO(), os.Getenv, opts...)
}

// Run executes one command line with the given streams and environment and
// returns the exit code. It prints the error, if any, exactly once.
func Run(ctx context.Context, args []string, streams *IOStreams, getenv func(string) string, opts ...FactoryOption) int {
	return runWith(ctx, rootFor, args, streams, getenv, opts...)
}

// runWith is Run with the root built by build (tests compare rootFor with
// the whole tree).
func runWith(ctx context.Context, build func(*Factory, []string) *cobra.Command, args []string, streams *IOStreams,
	getenv func(string) string, opts ...FactoryOption) (code int) {
	own := *streams // the command may make its writers terminal-safe
	streams = &own
	f := NewFactory(streams, getenv, opts...)
	defer f.closeTeam()
	defer f.stopTracing()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(streams.ErrOut, "internal error: %s\n", redact.String(fmt.Sprint(r), f.Secrets()...))
			if f.Opts != nil && f.Opts.Verbose {
				// The stack is for bug reports; it is never shown without -v.
				fmt.Fprintf(streams.ErrOut, "%s", redact.String(string(debug.Stack()), f.Secrets()...))
			}
			code = exitcode.Failure
		}
	}()
	root := build(f, args)
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	err = classify(c, err)
	printError(f, err)
	return ExitCode(err)
}

// fromRun marks errors returned by run functions and the settings
// resolution; every other error comes from cobra taking the command line
// apart, so it is a usage error.
type fromRun struct{ err error }

func (e *fromRun) Error() string { return e.err.Error() }
func (e *fromRun) Unwrap() error { return e.err }

func classify(c *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	var r *fromRun
	if errors.As(err, &r) {
		return r.err
	}
	path := "upgrade-agent"
	if c != nil {
		path = c.CommandPath()
	}
	return &FlagError{Err: err, CmdPath: path}
}

func printError(f *Factory, err error) {
	if err == nil {
		return
	}
	w := f.IO.ErrOut
	msg := redact.String(err.Error(), f.Secrets()...)
	if msg != "" {
		// "": a silent error; the command has said what it had to.
		fmt.Fprintf(w, "Error: %s\n", msg)
	}
	if hint := authHint(err); hint != "" {
		fmt.Fprintln(w, hint)
	}
	if _, hint := storeRefusal(err); hint != "" {
		if src := storeSource(f.Opts, f.Getenv); src != "" {
			hint += " (the URL is from " + src + ")"
		}
		fmt.Fprintln(w, hint)
	}
	var fe *FlagError
	if errors.As(err, &fe) && fe.CmdPath != "" {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", fe.CmdPath)
	}
}

// markRun wraps the run hooks of c and its subcommands so that classify
// can tell their errors from cobra's.
func markRun(c *cobra.Command) {
	wrap := func(fn func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
		if fn == nil {
			return nil
		}
		return func(cc *cobra.Command, args []string) error {
			if err := fn(cc, args); err != nil {
				return &fromRun{err: err}
			}
			return nil
		}
	}
	c.RunE = wrap(c.RunE)
	c.PersistentPreRunE = wrap(c.PersistentPreRunE)
	c.PreRunE = wrap(c.PreRunE)
	for _, sub := range c.Commands() {
		markRun(sub)
	}
}

// globalFlags are the raw values of the persistent flags.
type globalFlags struct {
	config         string
	stateDir       string
	upgradeURL     string
	upgradeToken   string
	upgradeTimeout time.Duration
	llm            string
	llmBaseURL     string
	model          string
	output         string
	verbose        bool
	noColor        bool
	store          string
	trace          string
	traceContent   bool
}

// topCommand is a command of spec/cli.md under the root.
type topCommand struct {
	name    string
	aliases []string
	build   func(*Factory) *cobra.Command
	// all: the command needs the whole tree (completion scripts).
	all bool
	// quick: the command finishes at once and never waits on anything,
	// so Execute installs no signal handling for it (Ctrl-C ends it the
	// usual way).
	quick bool
}

// topCommands are the commands of spec/cli.md, in the order help lists
// them, with the name and aliases that select each (TestTopCommands checks
// them against what build makes).
var topCommands = []topCommand{
	{name: "ask", build: func(f *Factory) *cobra.Command { return NewCmdAsk(f, nil) }},
	{name: "resume", build: func(f *Factory) *cobra.Command { return NewCmdResume(f, nil) }},
	{name: "sessions", build: newCmdSessions},
	{name: "changes", build: newCmdChanges},
	{name: "undo", build: func(f *Factory) *cobra.Command { return NewCmdUndo(f, nil) }},
	{name: "scenario", build: NewCmdScenario},
	{name: "eval", build: func(f *Factory) *cobra.Command { return NewCmdEval(f, nil) }},
	{name: "experiments", aliases: []string{"experiment", "exp"}, build: NewCmdExperiments},
	{name: "metrics", aliases: []string{"metric"}, build: NewCmdMetrics},
	{name: "flags", aliases: []string{"flag", "featureflags"}, build: NewCmdFlags},
	{name: "segments", aliases: []string{"segment", "seg"}, build: NewCmdSegments},
	{name: "stratification", aliases: []string{"strata"}, build: NewCmdStratification},
	{name: "contexts", aliases: []string{"context"}, build: func(f *Factory) *cobra.Command { return NewCmdContexts(f, nil) }},
	{name: "health", build: func(f *Factory) *cobra.Command { return NewCmdHealth(f, nil) }},
	{name: "jobs", build: NewCmdJobs},
	{name: "audit", build: NewCmdAudit},
	{name: "sim", build: NewCmdSim},
	{name: "version", build: func(f *Factory) *cobra.Command { return NewCmdVersion(f, nil) }, quick: true},
	{name: "completion", build: func(f *Factory) *cobra.Command { return NewCmdCompletion(f, nil) }, all: true, quick: true},
}

// NewRootCmd builds the whole command tree over f.
func NewRootCmd(f *Factory) *cobra.Command {
	return newRoot(f, topCommands, testCommands)
}

// rootFor builds the root for running args: the root with only the
// top-level command args select, when cobra resolves args to a command
// under it, else the whole tree (help, completion, no command, an unknown
// one with its suggestions). What cobra does with args then depends only
// on the root and that command's subtree, so it does the same as with the
// whole tree, and a simple command like "version" does not build the
// other commands with all their flags (TestLazyRootAsFullTree).
func rootFor(f *Factory, args []string) *cobra.Command {
	if tc := selectedCommand(args); tc != nil && !tc.all {
		root := newRoot(f, []topCommand{*tc}, nil)
		if c, _, err := root.Find(args); err == nil && c != root {
			return root
		}
	}
	return NewRootCmd(f)
}

// selectedCommand is the top-level command the first argument that is
// not a flag names, as cobra's Find takes it (a flag of the root that
// takes a value takes the next argument), nil when none does.
func selectedCommand(args []string) *topCommand {
	var g globalFlags
	fs := pflag.NewFlagSet("upgrade-agent", pflag.ContinueOnError)
	bindGlobalFlags(fs, &g)
	takesValue := func(fl *pflag.Flag) bool { return fl == nil || fl.NoOptDefVal == "" }
	name := ""
	for len(args) > 0 && name == "" {
		s := args[0]
		args = args[1:]
		switch {
		case s == "--":
			return nil
		case strings.HasPrefix(s, "--") && !strings.Contains(s, "=") && takesValue(fs.Lookup(s[2:])),
			strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--") && len(s) == 2 && takesValue(fs.ShorthandLookup(s[1:])):
			if len(args) <= 1 {
				return nil
			}
			args = args[1:]
		case s != "" && !strings.HasPrefix(s, "-"):
			name = s
		}
	}
	for i := range topCommands {
		if tc := &topCommands[i]; tc.name == name || slices.Contains(tc.aliases, name) {
			return tc
		}
	}
	return nil
}

// newRoot builds the root over f with the given commands under it.
func newRoot(f *Factory, cmds []topCommand, tests []func(*Factory) *cobra.Command) *cobra.Command {
	enableTraverseRunHooks()
	var g globalFlags
	root := &cobra.Command{
		Use:   "upgrade-agent",
		Short: "An LLM agent for the UpGrade A/B-testing platform",
		Long: `upgrade-agent carries out plain-English requests on an UpGrade server:
creating, starting and inspecting experiments, simulating students and
reporting condition balance. Without UPGRADE_API_URL it works against an
embedded simulator kept in the state dir.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if err := checkOutputFlag(c, g.output, c.Flags().Changed("output")); err != nil {
				return err
			}
			if skipGlobals(c) {
				// Only --output matters here, and only from the flag: a
				// broken config or environment must not stop "version".
				o := f.opts()
				if oneOf(g.output, config.Outputs) {
					o.Output = g.output
				} else if g.output != "" {
					return &FlagError{Err: fmt.Errorf("invalid --output: %q is not one of %s", g.output, strings.Join(config.Outputs, ", ")), CmdPath: c.CommandPath()}
				}
				return checkOutput(c, o, g.output != "")
			}
			opts, err := resolveGlobals(&g, c.Flags().Changed, f.Getenv)
			var fe *FlagError
			if errors.As(err, &fe) && fe.CmdPath == "" {
				fe.CmdPath = c.CommandPath()
			}
			if err != nil {
				return err
			}
			f.Opts = opts
			if err := f.startTracing(c); err != nil {
				return err
			}
			if err := checkOutput(c, opts, c.Flags().Changed("output")); err != nil {
				return err
			}
			if !isData(opts.Output) && opts.Output != "raw" {
				f.IO.Out = terminalSafe(f.IO.Out)
			}
			// Errors and notices on stderr carry names and messages too.
			f.IO.ErrOut = terminalSafe(f.IO.ErrOut)
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true // our own completion command replaces it
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &FlagError{Err: err, CmdPath: c.CommandPath()}
	})

	bindGlobalFlags(root.PersistentFlags(), &g)
	for _, tc := range cmds {
		root.AddCommand(tc.build(f))
	}
	for _, fn := range tests {
		root.AddCommand(fn(f))
	}
	// Each command's help names the -o values it takes.
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if fl := root.PersistentFlags().Lookup("output"); fl != nil && c.Runnable() && !c.HasSubCommands() {
			general := fl.Usage
			fl.Usage = outputHelp(c)
			defer func() { fl.Usage = general }()
		}
		help(c, args)
	})
	markRun(root)
	return root
}

// bindGlobalFlags defines the global flags of spec/cli.md on fs.
func bindGlobalFlags(fs *pflag.FlagSet, g *globalFlags) {
	fs.StringVar(&g.config, "config", "", "YAML config `file` (env UPGRADE_AGENT_CONFIG; default $XDG_CONFIG_HOME/upgrade-agent/config.yaml when present)")
	fs.StringVar(&g.stateDir, "state-dir", "", "`dir` for sessions, jobs and simulator data (env UPGRADE_AGENT_HOME; default $XDG_STATE_HOME/upgrade-agent)")
	fs.StringVar(&g.upgradeURL, "upgrade-url", "", "UpGrade API base `URL`, e.g. http://localhost:3030/api (env UPGRADE_API_URL; empty: the embedded simulator)")
	fs.StringVar(&g.upgradeToken, "upgrade-token", "", "bearer `token` for UpGrade admin routes (env UPGRADE_API_TOKEN)")
	fs.DurationVar(&g.upgradeTimeout, "upgrade-timeout", 0, "per-request timeout for UpGrade (env UPGRADE_API_TIMEOUT; default 30s)")
	fs.StringVar(&g.llm, "llm", "", "LLM `spec`: openai, script:FILE, replay:FILE or record:FILE (env UPGRADE_AGENT_LLM; default openai)")
	fs.StringVar(&g.llmBaseURL, "llm-base-url", "", "OpenAI-compatible API base `URL` (env OPENAI_BASE_URL)")
	fs.StringVar(&g.model, "model", "", "LLM model `name` (env UPGRADE_AGENT_MODEL)")
	fs.StringVarP(&g.output, "output", "o", "", "output `format`: text, json, yaml, wide (tables with every column) or raw (the server's object); each command's help says which it takes (default text)")
	fs.BoolVarP(&g.verbose, "verbose", "v", false, "trace HTTP calls, LLM calls and timings on stderr")
	fs.BoolVar(&g.noColor, "no-color", false, "plain output without colors (env NO_COLOR)")
	fs.StringVar(&g.trace, "trace", "", "write OpenTelemetry spans of this run as JSON lines to `file` (env UPGRADE_AGENT_TRACE; OTLP/HTTP as well when OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	fs.BoolVar(&g.traceContent, "trace-content", false, "record message and tool contents (redacted) in the spans")
	fs.StringVar(&g.store, "store", "", "shared store `URL` postgres://... for sessions, jobs and the audit trail (env UPGRADE_AGENT_STORE; empty: files in the state dir)")
}

func skipGlobals(c *cobra.Command) bool {
	for p := c; p != nil; p = p.Parent() {
		if p.Annotations[annotationNoGlobals] != "" {
			return true
		}
	}
	switch c.Name() {
	case "help", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return true
	}
	return false
}

// setting is one resolved value and where it came from, for messages.
type setting struct {
	value  string
	source string // "--flag", "ENV_VAR", "config FILE", or "" for the default
}

// resolveGlobals applies flag > environment > config file > default to the
// global settings and validates what the config package has not already.
// changed reports whether a flag was given on the command line.
func resolveGlobals(g *globalFlags, changed func(string) bool, getenv func(string) string) (*GlobalOptions, error) {
	cfg, err := loadConfig(g, changed, getenv)
	if err != nil {
		return nil, err
	}
	cfgSrc := "config " + cfg.File

	pick := func(flag, env, fromFlag, fromCfg string) setting {
		switch {
		case flag != "" && changed(flag):
			return setting{fromFlag, "--" + flag}
		case env != "" && getenv(env) != "":
			return setting{getenv(env), env}
		case fromCfg != "":
			return setting{fromCfg, cfgSrc}
		}
		return setting{}
	}
	o := &GlobalOptions{
		ConfigFile:      cfg.File,
		Config:          cfg,
		ClientAPIKey:    cfg.ClientAPIKey,
		ClientAPISecret: cfg.ClientAPISecret,
		AzureAPIVersion: cfg.AzureAPIVersion,
		LLMTimeout:      cfg.LLMTimeout,
		Verbose:         g.verbose,
	}

	// Flag and environment problems are reported with the name the person
	// used; config values were checked, with file and line, by config.Load.
	bad := func(s setting, format string, args ...any) error {
		err := fmt.Errorf("invalid %s: %s", s.source, fmt.Sprintf(format, args...))
		if strings.HasPrefix(s.source, "--") {
			return &FlagError{Err: err}
		}
		return &UsageError{Err: err}
	}

	stateDir := pick("state-dir", "UPGRADE_AGENT_HOME", g.stateDir, cfg.StateDir)
	if stateDir.value == "" {
		stateDir.value = defaultDir(getenv, "XDG_STATE_HOME", ".local/state")
	}
	if stateDir.value != "" {
		abs, err := filepath.Abs(stateDir.value)
		if err != nil {
			return nil, bad(stateDir, "%v", err)
		}
		o.StateDir = abs
	}

	upURL := pick("upgrade-url", "UPGRADE_API_URL", g.upgradeURL, cfg.UpgradeURL)
	if upURL.value != "" {
		if err := config.ValidateURL(upURL.value); err != nil {
			return nil, bad(upURL, "%v", err)
		}
	}
	o.UpgradeURL = upURL.value
	o.UpgradeToken = pick("upgrade-token", "UPGRADE_API_TOKEN", g.upgradeToken, cfg.UpgradeToken).value

	switch {
	case changed("upgrade-timeout"):
		if g.upgradeTimeout < 0 {
			return nil, bad(setting{source: "--upgrade-timeout"}, "must not be negative")
		}
		o.UpgradeTimeout = g.upgradeTimeout
	case getenv("UPGRADE_API_TIMEOUT") != "":
		s := setting{getenv("UPGRADE_API_TIMEOUT"), "UPGRADE_API_TIMEOUT"}
		d, err := time.ParseDuration(s.value)
		if err != nil {
			return nil, bad(s, "%q is not a duration (use Go syntax such as 30s or 2m)", s.value)
		}
		if d < 0 {
			return nil, bad(s, "must not be negative")
		}
		o.UpgradeTimeout = d
	case cfg.UpgradeTimeout != 0:
		o.UpgradeTimeout = cfg.UpgradeTimeout
	default:
		o.UpgradeTimeout = 30 * time.Second
	}

	spec := pick("llm", "UPGRADE_AGENT_LLM", g.llm, cfg.LLM)
	if spec.value == "" {
		spec.value = "openai"
	}
	if err := config.ValidateLLMSpec(spec.value); err != nil {
		return nil, bad(spec, "%v", err)
	}
	o.LLMSpec = spec.value

	base := pick("llm-base-url", "OPENAI_BASE_URL", g.llmBaseURL, cfg.LLMBaseURL)
	if base.value != "" {
		if err := config.ValidateURL(base.value); err != nil {
			return nil, bad(base, "%v", err)
		}
	}
	o.LLMBaseURL = base.value
	o.Model = pick("model", "UPGRADE_AGENT_MODEL", g.model, cfg.Model).value

	out := pick("output", "", g.output, cfg.Output)
	if out.value == "" {
		out.value = "text"
	}
	if !oneOf(out.value, config.Outputs) {
		return nil, bad(out, "%q is not one of %s", out.value, strings.Join(config.Outputs, ", "))
	}
	o.Output = out.value

	o.NoColor = g.noColor || getenv("NO_COLOR") != "" || cfg.NoColor
	if tr := pick("trace", "UPGRADE_AGENT_TRACE", g.trace, cfg.Trace); tr.value != "" {
		abs, err := filepath.Abs(tr.value)
		if err != nil {
			return nil, bad(tr, "%v", err)
		}
		o.Trace = abs
	}
	o.TraceContent = g.traceContent || cfg.TraceContent
	if err := resolveTeam(o, pick("store", "UPGRADE_AGENT_STORE", g.store, cfg.Store), getenv, bad); err != nil {
		return nil, err
	}
	return o, nil
}

// loadConfig reads the config file named by --config or
// UPGRADE_AGENT_CONFIG (which must exist), else the default one if present.
// An explicit empty --config reads no file at all.
func loadConfig(g *globalFlags, changed func(string) bool, getenv func(string) string) (*config.Config, error) {
	var path string
	explicit := true
	switch {
	case changed("config"):
		path = g.config
	case getenv("UPGRADE_AGENT_CONFIG") != "":
		path = getenv("UPGRADE_AGENT_CONFIG")
	default:
		explicit = false
		if dir := defaultDir(getenv, "XDG_CONFIG_HOME", ".config"); dir != "" {
			path = filepath.Join(dir, "config.yaml")
		}
	}
	if path == "" {
		return &config.Config{}, nil
	}
	cfg, err := config.Load(path, explicit)
	if err != nil {
		return nil, err
	}
	if cfg.File == "" && explicit {
		cfg.File = path
	}
	return cfg, nil
}

// defaultDir is $XDG_VAR/upgrade-agent, else $HOME/FALLBACK/upgrade-agent,
// else "" (no HOME: the caller must be told to set the setting).
func defaultDir(getenv func(string) string, xdgVar, fallback string) string {
	if x := getenv(xdgVar); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "upgrade-agent")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, fallback, "upgrade-agent")
	}
	return ""
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// Argument checks that fail as usage errors with a readable message.

func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%q takes no arguments, got %q", c.CommandPath(), args[0])
	}
	return nil
}

func exactArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return fmt.Errorf("%q needs %s, got %d argument(s)", c.CommandPath(), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

func maxArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > n {
			return fmt.Errorf("%q takes at most %d argument(s), got %d", c.CommandPath(), n, len(args))
		}
		return nil
	}
}

// groupCmd is a command that only holds subcommands. Without arguments it
// shows its help; an unknown subcommand is a usage error (cobra would
// otherwise print the help and exit 0).
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if c.SuggestionsMinimumDistance <= 0 {
				c.SuggestionsMinimumDistance = 2
			}
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return &FlagError{Err: errors.New(msg), CmdPath: c.CommandPath()}
		},
	}
}
