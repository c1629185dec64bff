package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmspec"
	"github.com/upgrade-agent/upgrade-agent/pipeline/eval"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
)

// EvalOptions are the inputs of "eval".
type EvalOptions struct {
	IO       *IOStreams
	Paths    []string
	Trials   int
	Parallel int
	Filter   string
	OutDir   string
	JUnit    string
	PriceIn  float64
	PriceOut float64
	MinPass  float64
	// Temperature is sent with every LLM call; nil = not sent.
	Temperature *float32
	Output      string
	// Model opens the model of one trial; Info describes it.
	Model func() (eval.ModelFunc, func(), error)
	Info  eval.Info
}

// NewCmdEval builds "eval".
func NewCmdEval(f *Factory, runF func(context.Context, *EvalOptions) error) *cobra.Command {
	opts := &EvalOptions{IO: f.IO}
	var temperature float64
	c := &cobra.Command{
		Use:   "eval [PATH...]",
		Short: "Measure the configured model on goal cases (pass^k, tokens, cost)",
		Long: `Plays every goal case (*.yaml under the PATHs; default evals/) --trials times,
each trial on a fresh embedded simulator through the same pipeline as ask, with
the person's answers to confirmations, and grades it by the backend afterwards.
Reports passes per case, pass@1, pass^k, pass@k, LLM calls, tokens, turn
latency and, with prices, the cost. Exit 0 when pass@1 is at least --min-pass,
1 below it, 2 for bad case files or flags, 3 when the model cannot be reached.`,
		Example: `  upgrade-agent eval --model gpt-4.1-mini --trials 5
  upgrade-agent eval evals --price-in 0.4 --price-out 1.6 --out eval-out/
  upgrade-agent eval --llm script:pipeline/eval/testdata/perfect.yaml --trials 2 -o json`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Paths = args
			if c.Flags().Changed("temperature") {
				if temperature < 0 || temperature > 2 {
					return &UsageError{Err: fmt.Errorf("--temperature %g: want a value from 0 to 2", temperature)}
				}
				t := float32(temperature)
				opts.Temperature = &t
			}
			if len(opts.Paths) == 0 {
				opts.Paths = []string{"evals"}
			}
			o := f.opts()
			opts.Output = o.Output
			opts.Model = func() (eval.ModelFunc, func(), error) { return f.evalModel() }
			opts.Info = eval.Info{Model: o.Model, BaseURLHost: hostOf(o.LLMBaseURL), Date: f.Now().UTC().Format("2006-01-02"),
				Version: BuildInfo().Version}
			if strings.HasPrefix(o.LLMSpec, "script:") {
				opts.Info.Scripted = true
				opts.Info.Model = o.LLMSpec
				opts.Info.BaseURLHost = "127.0.0.1"
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runEval(c.Context(), opts)
		},
	}
	c.Flags().IntVar(&opts.Trials, "trials", 3, "play each case `K` times")
	c.Flags().IntVar(&opts.Parallel, "parallel", 1, "run up to `N` trials at once")
	c.Flags().StringVar(&opts.Filter, "run", "", "only cases whose name matches `REGEX`")
	c.Flags().StringVar(&opts.OutDir, "out", "", "write report.json, report.md and transcripts/ to `DIR`")
	c.Flags().StringVar(&opts.JUnit, "junit", "", "also write one JUnit test case per trial to `FILE`")
	c.Flags().Float64Var(&opts.PriceIn, "price-in", 0, "`USD` per million prompt tokens (for the cost)")
	c.Flags().Float64Var(&opts.PriceOut, "price-out", 0, "`USD` per million completion tokens (for the cost)")
	c.Flags().Float64Var(&opts.MinPass, "min-pass", 0, "exit 1 when pass@1 is below `RATE` (0..1)")
	c.Flags().Float64Var(&temperature, "temperature", 0, "send `T` (0..2, 0 included) as the temperature of every LLM call; unset: the provider's default")
	return withOutputs(c, "json")
}

func hostOf(base string) string {
	if base == "" {
		return "api.openai.com"
	}
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Host
}

// evalModel gives a model per trial: for --llm script:FILE an eval script
// restarted for every trial, else the configured client shared by all.
func (f *Factory) evalModel() (eval.ModelFunc, func(), error) {
	o := f.opts()
	if path, ok := strings.CutPrefix(o.LLMSpec, "script:"); ok {
		s, err := llmspec.OpenEvalScript(path, llm.Options{Model: o.Model, Logger: f.Logger()})
		if err != nil {
			return nil, nil, &UsageError{Err: err}
		}
		return s.Client, func() {}, nil
	}
	client, closer, err := f.LLM()
	if err != nil {
		return nil, nil, err
	}
	model := func(string, int) (llm.Client, io.Closer, error) { return client, io.NopCloser(nil), nil }
	return model, func() { closeQuietly(f.IO.ErrOut, closer) }, nil
}

func runEval(ctx context.Context, opts *EvalOptions) error {
	switch {
	case opts.Trials < 1:
		return &UsageError{Err: fmt.Errorf("--trials %d: want at least 1", opts.Trials)}
	case opts.Parallel < 1:
		return &UsageError{Err: fmt.Errorf("--parallel %d: want at least 1", opts.Parallel)}
	case opts.MinPass < 0 || opts.MinPass > 1:
		return &UsageError{Err: fmt.Errorf("--min-pass %g: want a rate from 0 to 1", opts.MinPass)}
	case opts.PriceIn < 0 || opts.PriceOut < 0:
		return &UsageError{Err: errors.New("--price-in and --price-out: want a price of 0 or more")}
	}
	cases, err := scenario.LoadCases(opts.Paths)
	if err != nil {
		return &UsageError{Err: err}
	}
	if opts.Filter != "" {
		re, err := regexp.Compile(opts.Filter)
		if err != nil {
			return &UsageError{Err: fmt.Errorf("--run: %w", err)}
		}
		kept := cases[:0]
		for _, c := range cases {
			if re.MatchString(c.Name) {
				kept = append(kept, c)
			}
		}
		cases = kept
	}
	if len(cases) == 0 {
		return &UsageError{Err: fmt.Errorf("no case to run in %s", strings.Join(opts.Paths, ", "))}
	}
	model, done, err := opts.Model()
	if err != nil {
		return err
	}
	defer done()
	rep, err := eval.Run(ctx, cases, eval.Options{Trials: opts.Trials, Parallel: opts.Parallel, Model: model,
		Info: opts.Info, PriceIn: opts.PriceIn, PriceOut: opts.PriceOut, Temperature: opts.Temperature})
	if err != nil {
		// The figures of a run that could not reach the model measure
		// nothing: no report, the cause on stderr.
		return &ExitError{Code: exitcode.Auth, Err: err}
	}
	if opts.Output == "json" {
		err = eval.WriteJSON(opts.IO.Out, rep)
	} else {
		err = eval.WriteText(opts.IO.Out, rep)
	}
	if err != nil {
		return err
	}
	if opts.OutDir != "" {
		if err := eval.WriteOut(opts.OutDir, rep); err != nil {
			return fmt.Errorf("--out %s: %w", opts.OutDir, err)
		}
	}
	if opts.JUnit != "" {
		if err := writeEvalJUnit(opts.JUnit, rep); err != nil {
			return err
		}
	}
	if rep.Pass1 < opts.MinPass {
		return &ExitError{Code: exitcode.Failure, Err: fmt.Errorf("pass@1 %.4f is below --min-pass %g", rep.Pass1, opts.MinPass)}
	}
	return nil
}

func writeEvalJUnit(path string, rep *eval.Report) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	if err := eval.WriteJUnit(fh, rep); err != nil {
		fh.Close()
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	return nil
}
