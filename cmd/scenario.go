package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
)

// NewCmdScenario builds the "scenario" group.
func NewCmdScenario(f *Factory) *cobra.Command {
	c := groupCmd("scenario", "Replay and check YAML scenarios")
	c.AddCommand(NewCmdScenarioRun(f, nil), NewCmdScenarioCheck(f, nil))
	return c
}

// ScenarioEnvFunc gives the run options that reach outside the scenarios
// (backend: url, llm: live or record) and a cleanup; it is called only when
// some scenario needs them.
type ScenarioEnvFunc func(ctx context.Context, scs []*scenario.Scenario) (scenario.RunOptions, func(), error)

// ScenarioRunOptions are the inputs of "scenario run".
type ScenarioRunOptions struct {
	IO       *IOStreams
	Env      ScenarioEnvFunc
	Paths    []string
	Update   bool
	Parallel int
	JUnit    string
	Filter   string // --run: a regular expression over scenario names
	Verbose  bool   // -v: every transcript, and the trace, on stderr
	Logger   *slog.Logger
	// KeepState keeps each scenario's state dir in KeepState/<name>/.
	KeepState string
	// Parse carries --allow-outside-paths.
	Parse scenario.ParseOptions
}

// NewCmdScenarioRun builds "scenario run".
func NewCmdScenarioRun(f *Factory, runF func(context.Context, *ScenarioRunOptions) error) *cobra.Command {
	opts := &ScenarioRunOptions{IO: f.IO, Env: f.scenarioEnv}
	c := &cobra.Command{
		Use:   "run PATH...",
		Short: "Replay scenario files (files or folders) and compare golden transcripts",
		Long: `Runs every scenario (*.yaml, *.yml; folders are searched recursively), each in
its own state dir and, unless it says backend: url, its own embedded simulator.
Prints one line per scenario and, for failures, what differs. Exit 0 when all
pass, 1 when any fails, 2 when a file is invalid.`,
		Example: `  upgrade-agent scenario run scenarios/
  upgrade-agent scenario run --verbose scenarios/demo.yaml
  upgrade-agent scenario run --update --run 'create-.*' scenarios/
  upgrade-agent scenario run --parallel 8 --junit report.xml scenarios/
  upgrade-agent scenario run --keep-state kept/ scenarios/demo.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Paths = args
			opts.Verbose = f.opts().Verbose
			opts.Logger = f.Logger()
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runScenarioRun(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.Update, "update", false, "rewrite the golden transcripts instead of comparing them")
	c.Flags().IntVar(&opts.Parallel, "parallel", runtime.GOMAXPROCS(0), "run up to `N` scenarios at once")
	c.Flags().StringVar(&opts.JUnit, "junit", "", "also write the results as JUnit XML to `FILE`")
	c.Flags().StringVar(&opts.Filter, "run", "", "only scenarios whose name matches `REGEX`")
	c.Flags().StringVar(&opts.KeepState, "keep-state", "", "keep each scenario's state dir (sessions, simulator data) in `DIR`/<name>/, for resume")
	addAllowOutsidePaths(c, &opts.Parse)
	return withOutputs(c)
}

// addAllowOutsidePaths is the flag of run and check that lets a trusted
// scenario name cassettes and schemas outside its folder.
func addAllowOutsidePaths(c *cobra.Command, o *scenario.ParseOptions) {
	c.Flags().BoolVar(&o.AllowOutsidePaths, "allow-outside-paths", false,
		"accept cassette and output-schema paths that are absolute or lead out of the scenario's folder")
}

func runScenarioRun(ctx context.Context, opts *ScenarioRunOptions) error {
	if opts.Parallel < 1 {
		return Usagef("--parallel must be at least 1, got %d", opts.Parallel)
	}
	scs, err := opts.Parse.LoadAll(opts.Paths)
	if err != nil {
		return &UsageError{Err: err}
	}
	if opts.Filter != "" {
		re, err := regexp.Compile(opts.Filter)
		if err != nil {
			return Usagef("--run: %v", err)
		}
		var kept []*scenario.Scenario
		for _, sc := range scs {
			if re.MatchString(sc.Name) {
				kept = append(kept, sc)
			}
		}
		if len(kept) == 0 {
			return Usagef("--run %q matches none of the %d scenarios", opts.Filter, len(scs))
		}
		scs = kept
	}
	ropts, done, err := opts.Env(ctx, scs)
	if err != nil {
		return err
	}
	defer done()
	ropts.Update = opts.Update
	if opts.KeepState != "" {
		abs, err := filepath.Abs(opts.KeepState)
		if err != nil {
			return Usagef("--keep-state: %v", err)
		}
		ropts.KeepState = abs
	}
	if opts.Verbose {
		ropts.Logger = opts.Logger
	}

	start := time.Now()
	out := opts.IO.Out
	reports := scenario.RunAll(ctx, scs, ropts, opts.Parallel, func(r *scenario.Report) {
		fmt.Fprintln(out, r.Summary())
		if opts.Verbose {
			// -v is the trace, on stderr, as for every command.
			fmt.Fprintf(opts.IO.ErrOut, "\n%s\n", r.Transcript)
		}
		fmt.Fprint(out, r.Details())
	})
	failed, calls := 0, 0
	var usage error
	for _, r := range reports {
		calls += r.LLMCalls
		if !r.Passed() {
			failed++
		}
		if r.Err != nil && usage == nil && scenario.IsUsage(r.Err) {
			usage = r.Err
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed (%.1fs, %d LLM calls)\n", len(reports)-failed, failed, time.Since(start).Seconds(), calls)
	if opts.JUnit != "" {
		if err := writeJUnitFile(opts.JUnit, reports, time.Since(start)); err != nil {
			return err
		}
	}
	switch {
	case usage != nil:
		return &UsageError{Err: usage}
	case failed > 0:
		return &ExitError{Code: exitcode.Failure, Err: fmt.Errorf("%d of %d scenarios failed", failed, len(reports))}
	}
	return nil
}

func writeJUnitFile(path string, reports []*scenario.Report, wall time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	if err := scenario.WriteJUnit(f, reports, wall); err != nil {
		f.Close()
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	return nil
}

// scenarioEnv hands scenarios the configured UpGrade (backend: url) and,
// only when a scenario asks for llm: live, the configured LLM.
func (f *Factory) scenarioEnv(_ context.Context, scs []*scenario.Scenario) (scenario.RunOptions, func(), error) {
	o := f.opts()
	ro := scenario.RunOptions{
		UpgradeURL: o.UpgradeURL, UpgradeToken: o.UpgradeToken, UpgradeTimeout: o.UpgradeTimeout,
		Model: o.Model,
		LLMOptions: llm.Options{BaseURL: o.LLMBaseURL, APIKey: f.Getenv("OPENAI_API_KEY"), Model: o.Model,
			AzureAPIVersion: o.AzureAPIVersion, Timeout: o.LLMTimeout, Logger: f.Logger()},
	}
	done := func() {}
	for _, sc := range scs {
		if sc.LLM.Mode != scenario.LLMLive {
			continue
		}
		client, closer, err := f.LLM()
		if err != nil {
			if errors.Is(err, llm.ErrNotConfigured) {
				return ro, done, &UsageError{Err: fmt.Errorf("%s uses llm: live: %w", sc.File, err)}
			}
			return ro, done, err
		}
		ro.LLM = client
		done = func() { closeQuietly(f.IO.ErrOut, closer) }
		break
	}
	return ro, done, nil
}

func closeQuietly(w io.Writer, c io.Closer) {
	if c == nil {
		return
	}
	if err := c.Close(); err != nil {
		fmt.Fprintf(w, "warning: %v\n", err)
	}
}

// ScenarioCheckOptions are the inputs of "scenario check".
type ScenarioCheckOptions struct {
	IO    *IOStreams
	Paths []string
	Parse scenario.ParseOptions // --allow-outside-paths
}

// NewCmdScenarioCheck builds "scenario check".
func NewCmdScenarioCheck(f *Factory, runF func(context.Context, *ScenarioCheckOptions) error) *cobra.Command {
	opts := &ScenarioCheckOptions{IO: f.IO}
	c := &cobra.Command{
		Use:     "check PATH...",
		Short:   "Validate scenario files without running them",
		Long:    "Parses every scenario strictly (unknown keys and wrong types are errors with file:line:col) and checks the files it refers to. Exit 0 when all are valid, 2 otherwise.",
		Example: "  upgrade-agent scenario check scenarios/",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Paths = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runScenarioCheck(c.Context(), opts)
		},
	}
	addAllowOutsidePaths(c, &opts.Parse)
	return withOutputs(c)
}

func runScenarioCheck(_ context.Context, opts *ScenarioCheckOptions) error {
	scs, err := opts.Parse.LoadAll(opts.Paths)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, sc := range scs {
		if cerr := scenario.Check(sc); cerr != nil {
			errs = append(errs, cerr)
			continue
		}
		steps := "steps"
		if len(sc.Steps) == 1 {
			steps = "step"
		}
		fmt.Fprintf(opts.IO.Out, "ok %s (%s, %d %s)\n", sc.Name, sc.File, len(sc.Steps), steps)
	}
	if len(errs) > 0 {
		return &UsageError{Err: errors.Join(errs...)}
	}
	return nil
}
