package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
)

// ErrUnreachable marks a run stopped because the model could not be
// reached (the CLI exits 3).
var ErrUnreachable = errors.New("the LLM cannot be reached")

// ModelFunc gives the model of one trial (1-based) of a case and what
// closes it; the Closer's error (a scripted model whose script went
// unused) fails the trial.
type ModelFunc func(caseName string, trial int) (llm.Client, io.Closer, error)

// Options configure Run.
type Options struct {
	Trials   int // default 3
	Parallel int // default 1
	Model    ModelFunc
	// Info describes the model in the report.
	Info Info
	// PriceIn and PriceOut are USD per million prompt and completion
	// tokens; both 0 = no cost in the report.
	PriceIn, PriceOut float64
	// Timeout bounds one trial; 0 = the scenario runner's default.
	Timeout time.Duration
	// Temperature is sent with every LLM call of every trial (0 too); nil
	// = not sent, the provider's default. The report names it.
	Temperature *float32
}

// Info describes the run.
type Info struct {
	Model       string `json:"model"`
	BaseURLHost string `json:"base_url_host"`
	// Temperature is what was sent (Run sets it from Options.Temperature);
	// null: none, the provider's default.
	Temperature *float64 `json:"temperature"`
	Date        string   `json:"date"`
	Version     string   `json:"version"`
	Scripted    bool     `json:"scripted"`
}

// Report is the outcome of a run; its JSON is `eval -o json` and report.json.
type Report struct {
	Info   Info         `json:"info"`
	Trials int          `json:"trials"`
	Cases  []CaseReport `json:"cases"`
	// Pass1 is the mean over all trials; PassHat[k-1] is pass^k and
	// PassAt[k-1] pass@k, each averaged over cases.
	Pass1   float64   `json:"pass_at_1"`
	PassHat []float64 `json:"pass_hat_k"`
	PassAt  []float64 `json:"pass_at_k"`
	Usage
	LatencyP50Ms    int64    `json:"turn_latency_p50_ms"`
	LatencyP95Ms    int64    `json:"turn_latency_p95_ms"`
	CostUSD         *float64 `json:"cost_usd,omitempty"`
	ForbiddenEvents int      `json:"forbidden_events"`
	UnapprovedWrite int      `json:"unapproved_writes"`
}

// Usage counts the model's work.
type Usage struct {
	LLMCalls         int  `json:"llm_calls"`
	PromptTokens     int  `json:"prompt_tokens"`
	CompletionTokens int  `json:"completion_tokens"`
	TokensEstimated  bool `json:"tokens_estimated"`
}

func (u *Usage) add(v Usage) {
	u.LLMCalls += v.LLMCalls
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
	u.TokensEstimated = u.TokensEstimated || v.TokensEstimated
}

// CaseReport is one case over its trials.
type CaseReport struct {
	Name   string        `json:"name"`
	File   string        `json:"file"`
	Passed int           `json:"passed"`
	Trials []TrialReport `json:"trials"`
}

// TrialReport is one trial.
type TrialReport struct {
	Trial  int      `json:"trial"`
	Passed bool     `json:"passed"`
	Reason string   `json:"reason,omitempty"`
	Events []string `json:"events,omitempty"`
	Usage
	DurationMs int64 `json:"duration_ms"`
	// Transcript is every LLM request and response, tool call and backend
	// write of the trial, one JSON object a line (--out).
	Transcript []json.RawMessage `json:"-"`
	latencies  []time.Duration
	unapproved int
	forbidden  int
	unreach    error // the model could not be reached
}

// Run plays every case Trials times and reports. When a trial could not
// reach the model (network, or refused credentials) the trials not yet
// started are not played: it returns the report so far and an error that
// wraps ErrUnreachable and the model's error.
func Run(ctx context.Context, cases []*scenario.Case, opts Options) (*Report, error) {
	if opts.Trials <= 0 {
		opts.Trials = 3
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 1
	}
	rep := &Report{Info: opts.Info, Trials: opts.Trials, Cases: make([]CaseReport, len(cases))}
	rep.Info.Temperature = nil
	if opts.Temperature != nil {
		// Through the decimal text, so 0.7 reads 0.7 and not 0.699999988.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(*opts.Temperature), 'g', -1, 32), 64)
		rep.Info.Temperature = &f
	}
	type job struct{ c, t int }
	jobs := make(chan job)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error // the first trial that could not reach the model
	)
	for i, c := range cases {
		rep.Cases[i] = CaseReport{Name: c.Name, File: c.File, Trials: make([]TrialReport, opts.Trials)}
	}
	for w := 0; w < opts.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				mu.Lock()
				stop := firstErr != nil
				mu.Unlock()
				if stop {
					rep.Cases[j.c].Trials[j.t] = TrialReport{Trial: j.t + 1, Reason: "not played: the model could not be reached"}
					continue
				}
				tr := runTrial(ctx, cases[j.c], j.t+1, opts)
				if tr.unreach != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = tr.unreach
					}
					mu.Unlock()
				}
				rep.Cases[j.c].Trials[j.t] = tr
			}
		}()
	}
	for t := 0; t < opts.Trials; t++ {
		for c := range cases {
			jobs <- job{c, t}
		}
	}
	close(jobs)
	wg.Wait()
	summarise(rep, opts)
	if firstErr != nil {
		return rep, fmt.Errorf("%w: %w", ErrUnreachable, firstErr)
	}
	return rep, nil
}

func summarise(rep *Report, opts Options) {
	K := opts.Trials
	rep.PassHat = make([]float64, K)
	rep.PassAt = make([]float64, K)
	var lat []time.Duration
	total, passed := 0, 0
	for i := range rep.Cases {
		cr := &rep.Cases[i]
		for _, t := range cr.Trials {
			total++
			if t.Passed {
				cr.Passed++
				passed++
			}
			rep.add(t.Usage)
			lat = append(lat, t.latencies...)
			rep.ForbiddenEvents += t.forbidden
			rep.UnapprovedWrite += t.unapproved
		}
		for k := 1; k <= K; k++ {
			rep.PassHat[k-1] += PassHat(cr.Passed, K, k)
			rep.PassAt[k-1] += PassAt(cr.Passed, K, k)
		}
	}
	if n := float64(len(rep.Cases)); n > 0 {
		for k := range rep.PassHat {
			rep.PassHat[k] = round4(rep.PassHat[k] / n)
			rep.PassAt[k] = round4(rep.PassAt[k] / n)
		}
	}
	if total > 0 {
		rep.Pass1 = round4(float64(passed) / float64(total))
	}
	rep.LatencyP50Ms = percentile(lat, 50).Milliseconds()
	rep.LatencyP95Ms = percentile(lat, 95).Milliseconds()
	if opts.PriceIn > 0 || opts.PriceOut > 0 {
		c := math.Round((float64(rep.PromptTokens)*opts.PriceIn+float64(rep.CompletionTokens)*opts.PriceOut)/1e6*1e6) / 1e6
		rep.CostUSD = &c
	}
}

func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }

// binom is C(n, k) as a float (n stays small: the number of trials).
func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// PassHat is pass^k of one case with c passes in n trials: the chance that
// k trials drawn without replacement all pass, C(c,k)/C(n,k).
func PassHat(c, n, k int) float64 {
	if d := binom(n, k); d > 0 {
		return binom(c, k) / d
	}
	return 0
}

// PassAt is pass@k: the chance that at least one of k trials drawn
// without replacement passes, 1 - C(n-c,k)/C(n,k).
func PassAt(c, n, k int) float64 {
	if d := binom(n, k); d > 0 {
		return 1 - binom(n-c, k)/d
	}
	return 0
}

// percentile is the nearest-rank percentile; 0 for no samples.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(float64(p) / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// reasonOf is the first failure, on one line.
func reasonOf(fs []string) string {
	if len(fs) == 0 {
		return ""
	}
	s := strings.Join(strings.Fields(fs[0]), " ")
	if len(fs) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(fs)-1)
	}
	return s
}
