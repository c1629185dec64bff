package actions

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/internal/stats"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// BalanceTally is the committed progress of a condition-balance run. It is
// what a job record stores: a restarted run continues from it.
type BalanceTally struct {
	Done       int            `json:"done"`
	Total      int            `json:"total"`
	Counts     map[string]int `json:"counts"` // condition code -> users
	Unassigned int            `json:"unassigned"`
	Errors     int            `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
}

func (t BalanceTally) clone() BalanceTally {
	c := t
	c.Counts = make(map[string]int, len(t.Counts))
	for k, v := range t.Counts {
		c.Counts[k] = v
	}
	return c
}

// BalanceOptions tune RunBalance.
type BalanceOptions struct {
	// Concurrency is how many users are in flight at once (default 16).
	Concurrency int
	// BatchSize is how many users make one committed unit of progress
	// (default 50).
	BatchSize int
	// UserPrefix names the synthetic users: prefix + index. It must be the
	// same for every run of one job, so that a restarted run continues
	// with the next index; required.
	UserPrefix string
	// Commit is called after each complete batch, in index order, with the
	// tally including that batch. An error stops the run.
	Commit func(t BalanceTally) error
}

// Defaults of BalanceOptions.
const (
	DefaultBalanceConcurrency = 16
	DefaultBalanceBatchSize   = 50
)

// BalanceUserID is the id of synthetic user i of a run.
func BalanceUserID(prefix string, i int) string { return prefix + strconv.Itoa(i) }

type userOutcome struct {
	index int
	code  string // "" = unassigned
	err   error
}

type batchAcc struct {
	size       int
	n          int
	counts     map[string]int
	unassigned int
	errors     int
	firstIdx   int
	firstErr   string
}

// RunBalance simulates users start.Done .. p.NumUsers-1 and returns the
// tally. Each user is initialised (with p's group and working group),
// assigned in p.Context and marked at p.Site/p.Target with what was assigned
// there. A user counts for a condition only when the assignment there
// belongs to p.ExperimentID (any experiment when it is empty); otherwise the
// user is unassigned.
//
// Users run in a pool of opts.Concurrency goroutines; results are grouped
// in batches of opts.BatchSize consecutive indices and a batch is added to
// the tally (and committed) only once all its users are done, in index
// order. The returned tally is always the last committed one, so a run that
// stops early (cancelled context, failed Commit, a batch where every user
// failed) can be resumed from it without counting any user twice.
func RunBalance(ctx context.Context, api UserAPI, p BalanceParams, start BalanceTally, opts BalanceOptions) (BalanceTally, error) {
	total := p.NumUsers
	switch {
	case opts.UserPrefix == "":
		return start, errors.New("balance: a user prefix is required, so that a resumed run continues with the same users")
	case total < 1 || total > MaxBalanceUsers:
		return start, fmt.Errorf("balance: num_users must be between 1 and %d (got %d)", MaxBalanceUsers, total)
	case start.Done < 0 || start.Done > total:
		return start, fmt.Errorf("balance: the saved progress (%d done) does not fit %d users", start.Done, total)
	case start.Total != 0 && start.Total != total:
		return start, fmt.Errorf("balance: the saved progress is for %d users, not %d", start.Total, total)
	}
	conc := opts.Concurrency
	if conc <= 0 {
		conc = DefaultBalanceConcurrency
	}
	size := opts.BatchSize
	if size <= 0 {
		size = DefaultBalanceBatchSize
	}
	tally := start.clone()
	tally.Total = total
	if tally.Done == total {
		return tally, nil
	}
	if conc > total-tally.Done {
		conc = total - tally.Done
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	indices := make(chan int)
	results := make(chan userOutcome, conc)
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range indices {
				r := balanceUser(runCtx, api, p, opts.UserPrefix, i)
				select {
				case results <- r:
				case <-runCtx.Done():
					return
				}
			}
		}()
	}
	// Dispatch runs at most window users ahead of the committed tally:
	// memory for pending batches stays bounded, and a server that fails
	// every call is noticed after a batch, not after all users. The window
	// holds a whole batch plus the pool, so the pool never idles waiting
	// for a commit.
	window := 2*size + conc
	tickets := make(chan struct{}, window)
	go func() {
		defer close(indices)
		for i := tally.Done; i < total; i++ {
			select {
			case tickets <- struct{}{}:
			case <-runCtx.Done():
				return
			}
			select {
			case indices <- i:
			case <-runCtx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()

	// stop cancels the workers and waits for them, so that no goroutine
	// of this run outlives the call.
	stop := func() {
		cancel()
		for range results {
		}
	}

	first := tally.Done
	batchOf := func(i int) int { return (i - first) / size }
	batchSize := func(k int) int {
		lo := first + k*size
		return min(size, total-lo)
	}
	pending := map[int]*batchAcc{}
	next := 0
	for r := range results {
		k := batchOf(r.index)
		acc := pending[k]
		if acc == nil {
			acc = &batchAcc{size: batchSize(k), counts: map[string]int{}, firstIdx: -1}
			pending[k] = acc
		}
		acc.add(r)
		for {
			acc, ok := pending[next]
			if !ok || acc.n < acc.size {
				break
			}
			if runCtx.Err() != nil {
				// Users that ran into the cancellation count as errors
				// that did not really happen; keep the batch out.
				stop()
				return tally, runCtx.Err()
			}
			// A whole batch of failures means UpGrade is down or refuses
			// every user: stop rather than grind through the rest. A
			// short last batch is not evidence enough.
			if acc.errors == acc.size && acc.size == min(size, total-first) {
				stop()
				lo := first + next*size
				return tally, fmt.Errorf("balance: every user of %d..%d failed: %s", lo, lo+acc.size-1, acc.firstErr)
			}
			candidate := tally.clone()
			acc.mergeInto(&candidate)
			if opts.Commit != nil {
				if err := opts.Commit(candidate.clone()); err != nil {
					stop()
					return tally, fmt.Errorf("balance: committing progress at %d users: %w", candidate.Done, err)
				}
			}
			tally = candidate
			delete(pending, next)
			next++
			for j := 0; j < acc.size; j++ {
				<-tickets
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return tally, err
	}
	if tally.Done != total {
		// Only reachable if workers stopped without the context ending.
		return tally, fmt.Errorf("balance: stopped at %d of %d users", tally.Done, total)
	}
	return tally, nil
}

func (a *batchAcc) add(r userOutcome) {
	a.n++
	switch {
	case r.err != nil:
		a.errors++
		if a.firstIdx < 0 || r.index < a.firstIdx {
			a.firstIdx, a.firstErr = r.index, r.err.Error()
		}
	case r.code == "":
		a.unassigned++
	default:
		a.counts[r.code]++
	}
}

func (a *batchAcc) mergeInto(t *BalanceTally) {
	t.Done += a.n
	t.Unassigned += a.unassigned
	t.Errors += a.errors
	for code, n := range a.counts {
		t.Counts[code] += n
	}
	if t.FirstError == "" && a.firstErr != "" {
		t.FirstError = a.firstErr
	}
}

func balanceUser(ctx context.Context, api UserAPI, p BalanceParams, prefix string, i int) userOutcome {
	ac, err := visit(ctx, api, BalanceUserID(prefix, i), p.Context, p.Site, p.Target, p.Group, p.WorkingGroup)
	if err != nil {
		return userOutcome{index: i, err: err}
	}
	if ac == nil || (p.ExperimentID != "" && ac.ExperimentID != p.ExperimentID) {
		return userOutcome{index: i}
	}
	return userOutcome{index: i, code: ac.ConditionCode}
}

// ConditionShare is one condition's line of a balance result. Share and
// ExpectedShare are fractions of the assigned users (0..1).
type ConditionShare struct {
	Code          string  `json:"code"`
	Count         int     `json:"count"`
	Share         float64 `json:"share"`
	ExpectedShare float64 `json:"expected_share"`
	Expected      float64 `json:"expected_count"`
}

// BalanceResult is the outcome of test_condition_balance. DF is 0 when no
// test was possible (fewer than two weighted conditions, nobody assigned, or
// no experiment to take weights from); ChiSquare and PValue are then 0 and 1.
type BalanceResult struct {
	ExperimentID    string           `json:"experiment_id,omitempty"`
	ExperimentName  string           `json:"experiment_name,omitempty"`
	ExperimentState upgrade.State    `json:"experiment_state,omitempty"`
	Users           int              `json:"users"`
	Assigned        int              `json:"assigned"`
	Conditions      []ConditionShare `json:"conditions"`
	Unassigned      int              `json:"unassigned"`
	Errors          int              `json:"errors"`
	FirstError      string           `json:"first_error,omitempty"`
	ChiSquare       float64          `json:"chi_square"`
	DF              int              `json:"df"`
	PValue          float64          `json:"p_value"`
	Warnings        []string         `json:"warnings,omitempty"`
}

// Significance is the p-value under which a balance result warns that the
// counts do not follow the weights.
const Significance = 0.05

// SummarizeBalance turns a tally into the result the person reads: counts
// and shares per condition against the shares the experiment's weights
// expect, and a chi-square goodness-of-fit test. The experiment is
// p.ExperimentID, or else the one experiment with that decision point in
// the context (an enrolling one preferred).
func SummarizeBalance(ctx context.Context, api ExperimentAPI, p BalanceParams, t BalanceTally) (*BalanceResult, error) {
	res := &BalanceResult{Users: t.Done, Unassigned: t.Unassigned, Errors: t.Errors, FirstError: t.FirstError, PValue: 1}
	e, warn, err := balanceExperiment(ctx, api, p)
	if err != nil {
		return nil, err
	}
	if warn != "" {
		res.Warnings = append(res.Warnings, warn)
	}

	var weights []upgrade.Condition
	if e != nil {
		res.ExperimentID, res.ExperimentName, res.ExperimentState = e.ID, e.Name, e.State
		weights = sortedConditions(e.Conditions)
	}
	known := map[string]bool{}
	for _, c := range weights {
		known[c.ConditionCode] = true
		res.Conditions = append(res.Conditions, ConditionShare{Code: c.ConditionCode, Count: t.Counts[c.ConditionCode],
			ExpectedShare: c.AssignmentWeight / 100})
	}
	var extra []string
	for code := range t.Counts {
		if !known[code] {
			extra = append(extra, code)
		}
	}
	sort.Strings(extra)
	for _, code := range extra {
		res.Conditions = append(res.Conditions, ConditionShare{Code: code, Count: t.Counts[code]})
	}
	if res.Conditions == nil {
		res.Conditions = []ConditionShare{}
	}
	for _, c := range res.Conditions {
		res.Assigned += c.Count
	}
	for i := range res.Conditions {
		c := &res.Conditions[i]
		if res.Assigned > 0 {
			c.Share = float64(c.Count) / float64(res.Assigned)
		}
		c.Expected = c.ExpectedShare * float64(res.Assigned)
	}
	if len(extra) > 0 && e != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("conditions %s are not conditions of experiment %q; left out of the test", listOrNone(extra), e.Name))
	}

	// The test runs over the conditions the weights give a chance; a
	// zero-weight condition that nevertheless got users makes the fit
	// fail outright, which the p-value of the others would hide.
	var obs []int
	var shares []float64
	inTest := 0
	for _, c := range res.Conditions {
		if c.ExpectedShare > 0 {
			obs = append(obs, c.Count)
			shares = append(shares, c.ExpectedShare)
			inTest += c.Count
		}
	}
	switch {
	case e == nil:
	case len(obs) < 2:
		res.Warnings = append(res.Warnings, "fewer than two conditions with a weight: no test of the balance is possible")
	case inTest == 0:
	default:
		fit, err := stats.SampleRatio(obs, shares)
		if err != nil {
			return nil, fmt.Errorf("balance test: %w", err)
		}
		res.ChiSquare, res.DF, res.PValue = fit.ChiSquare, fit.DF, fit.P
		if smallExpected(shares, inTest) {
			res.Warnings = append(res.Warnings, "some expected counts are below 5: the chi-square p-value is only approximate")
		}
		if res.PValue < Significance {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the counts differ from the weights more than chance explains (p = %.4g)", res.PValue))
		}
	}
	for _, c := range res.Conditions {
		if c.ExpectedShare == 0 && c.Count > 0 && known[c.Code] {
			res.Warnings = append(res.Warnings, fmt.Sprintf("condition %s has weight 0 but %d users got it", c.Code, c.Count))
		}
	}
	if e != nil && e.State != upgrade.StateEnrolling {
		res.Warnings = append(res.Warnings, fmt.Sprintf("experiment is not enrolling (state %s): every user got the default", e.State))
	} else if res.Assigned == 0 && res.Users > 0 {
		res.Warnings = append(res.Warnings, "no user was assigned a condition at this decision point")
	}
	if t.Errors > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of %d users failed: %s", t.Errors, t.Done, t.FirstError))
	}
	return res, nil
}

func balanceExperiment(ctx context.Context, api ExperimentAPI, p BalanceParams) (*upgrade.Experiment, string, error) {
	if p.ExperimentID != "" {
		e, err := api.Experiment(ctx, p.ExperimentID)
		if err != nil {
			return nil, "", fmt.Errorf("reading experiment %s: %w", p.ExperimentID, err)
		}
		return e, "", nil
	}
	es, err := experimentsAt(ctx, api, p.Context, p.Site, p.Target)
	if err != nil {
		return nil, "", err
	}
	var enrolling []int
	for i := range es {
		if es[i].State == upgrade.StateEnrolling {
			enrolling = append(enrolling, i)
		}
	}
	switch {
	case len(enrolling) == 1:
		return &es[enrolling[0]], "", nil
	case len(enrolling) == 0 && len(es) == 1:
		return &es[0], "", nil
	case len(es) == 0:
		return nil, "no experiment has this decision point: there are no weights to compare with", nil
	}
	return nil, fmt.Sprintf("%d experiments share this decision point (%s): give experiment_id to compare with one's weights",
		len(es), fmtExperiments(es)), nil
}

// smallExpected reports whether a condition's expected count (its share
// of the weights times the users in the test) is below 5, where the
// chi-square p-value is only approximate.
func smallExpected(shares []float64, total int) bool {
	sum := 0.0
	for _, w := range shares {
		sum += w
	}
	for _, w := range shares {
		if w/sum*float64(total) < 5 {
			return true
		}
	}
	return false
}
