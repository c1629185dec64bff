package actions

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func streamBalance(n int) BalanceParams {
	return BalanceParams{NumUsers: n, Context: "mathstream", Site: "lesson-stream", Target: "question-hint", ExperimentID: streamExpID}
}

func tallySum(t BalanceTally) int {
	n := t.Unassigned + t.Errors
	for _, c := range t.Counts {
		n += c
	}
	return n
}

func TestRunBalanceCounts(t *testing.T) {
	f := seeded()
	var commits []int
	got, err := RunBalance(context.Background(), f, streamBalance(1000), BalanceTally{}, BalanceOptions{
		UserPrefix: "bal-",
		Commit:     func(t BalanceTally) error { commits = append(commits, t.Done); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Done != 1000 || got.Total != 1000 || tallySum(got) != 1000 || got.Errors != 0 || got.Unassigned != 0 {
		t.Errorf("tally = %+v", got)
	}
	for code := range got.Counts {
		if code != "question-hint-default" && code != "question-hint-tutorbot" {
			t.Errorf("counted unknown code %q", code)
		}
	}
	if len(commits) != 20 {
		t.Fatalf("%d commits, want 20 batches of 50", len(commits))
	}
	for i, done := range commits {
		if done != (i+1)*50 {
			t.Fatalf("commit %d at %d done, want %d (in order)", i, done, (i+1)*50)
		}
	}
	if len(f.users) != 1000 || f.count("Init") != 1000 || f.count("Assign") != 1000 || f.count("Mark") != 1000 {
		t.Errorf("%d users, %d init, %d assign, %d mark", len(f.users), f.count("Init"), f.count("Assign"), f.count("Mark"))
	}
	for i := 0; i < 1000; i++ {
		if _, ok := f.users[BalanceUserID("bal-", i)]; !ok {
			t.Fatalf("user %d was never initialised", i)
		}
	}
}

func TestRunBalancePartialLastBatch(t *testing.T) {
	var commits []int
	got, err := RunBalance(context.Background(), seeded(), streamBalance(123), BalanceTally{}, BalanceOptions{
		UserPrefix: "p-", BatchSize: 50, Concurrency: 4,
		Commit: func(t BalanceTally) error { commits = append(commits, t.Done); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Done != 123 || tallySum(got) != 123 || !cmp.Equal(commits, []int{50, 100, 123}) {
		t.Errorf("tally %+v, commits %v", got, commits)
	}
}

// A run that stops after three committed batches is resumed from the
// committed tally: the final counts are exactly those of an uninterrupted
// run, so no user was counted twice or skipped.
func TestRunBalanceResume(t *testing.T) {
	const n = 1000
	reference, err := RunBalance(context.Background(), seeded(), streamBalance(n), BalanceTally{}, BalanceOptions{UserPrefix: "job-7-"})
	if err != nil {
		t.Fatal(err)
	}

	stops := map[string]func(cancel context.CancelFunc) error{
		"commit fails": func(context.CancelFunc) error { return errors.New("disk full") },
		"cancelled":    func(cancel context.CancelFunc) error { cancel(); return nil },
	}
	for name, stop := range stops {
		t.Run(name, func(t *testing.T) {
			f := seeded()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var saved BalanceTally // what the job record holds
			calls := 0
			got, err := RunBalance(ctx, f, streamBalance(n), BalanceTally{}, BalanceOptions{
				UserPrefix: "job-7-",
				Commit: func(t BalanceTally) error {
					calls++
					if calls == 4 {
						return stop(cancel)
					}
					saved = t
					return nil
				},
			})
			if err == nil {
				t.Fatal("the interrupted run reported no error")
			}
			if name == "commit fails" {
				if got.Done != 150 || !cmp.Equal(got, saved) {
					t.Errorf("returned %+v, want the committed tally %+v", got, saved)
				}
			} else {
				saved = got // a cancelled run returns the last committed tally
				if !errors.Is(err, context.Canceled) || got.Done != 200 {
					t.Errorf("cancelled run: %+v, %v; want 200 done (the 4th commit went through)", got, err)
				}
			}
			if tallySum(saved) != saved.Done {
				t.Errorf("saved tally inconsistent: %+v", saved)
			}

			final, err := RunBalance(context.Background(), f, streamBalance(n), saved, BalanceOptions{UserPrefix: "job-7-"})
			if err != nil {
				t.Fatal(err)
			}
			if final.Done != n || tallySum(final) != n {
				t.Errorf("final tally %+v does not add up to %d", final, n)
			}
			if diff := cmp.Diff(reference, final); diff != "" {
				t.Errorf("resumed counts differ from an uninterrupted run (-want +got):\n%s", diff)
			}
			if len(f.users) != n {
				t.Errorf("%d distinct users, want %d", len(f.users), n)
			}
			for id := range f.users {
				if !strings.HasPrefix(id, "job-7-") {
					t.Errorf("unexpected user %q", id)
				}
			}
		})
	}
}

func TestRunBalanceConcurrency(t *testing.T) {
	f := seeded()
	f.gateAt = 8 // every Init waits until 8 are in flight together
	got, err := RunBalance(context.Background(), f, streamBalance(64), BalanceTally{}, BalanceOptions{UserPrefix: "c-", Concurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	if f.maxInflight < 8 {
		t.Errorf("at most %d users in flight with Concurrency 16, want >= 8", f.maxInflight)
	}
	if f.maxInflight > 16 {
		t.Errorf("%d users in flight, more than Concurrency 16", f.maxInflight)
	}
	if got.Done != 64 {
		t.Errorf("done %d", got.Done)
	}

	f = seeded()
	if _, err := RunBalance(context.Background(), f, streamBalance(40), BalanceTally{}, BalanceOptions{UserPrefix: "c-", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if f.maxInflight != 1 {
		t.Errorf("Concurrency 1 had %d in flight", f.maxInflight)
	}
}

func TestRunBalanceOnlyTheExperiment(t *testing.T) {
	f := seeded()
	other := streamExp()
	other.ID, other.Name = "3eab8f5b-b03d-4c8a-a09c-6f4d5e7f8091", "Other Hints"
	other.Conditions[0].ID, other.Conditions[1].ID = "aa000000-0000-4000-8000-000000000001", "aa000000-0000-4000-8000-000000000002"
	f.add(other)

	got, err := RunBalance(context.Background(), f, streamBalance(400), BalanceTally{}, BalanceOptions{UserPrefix: "o-"})
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := 0, 0
	for _, m := range f.marks {
		switch m.Req.Data.AssignedCondition.ExperimentID {
		case streamExpID:
			ours++
		case other.ID:
			theirs++
		}
	}
	if theirs == 0 || ours == 0 {
		t.Fatalf("the fake did not split users between the experiments (%d/%d)", ours, theirs)
	}
	if got.Unassigned != theirs || tallySum(got) != 400 || tallySum(got)-got.Unassigned != ours {
		t.Errorf("tally %+v; %d users in our experiment, %d in the other", got, ours, theirs)
	}

	// Without an experiment id, every assignment counts.
	f2 := seeded()
	f2.add(other)
	all, err := RunBalance(context.Background(), f2, BalanceParams{NumUsers: 400, Context: "mathstream", Site: "lesson-stream", Target: "question-hint"}, BalanceTally{}, BalanceOptions{UserPrefix: "o-"})
	if err != nil {
		t.Fatal(err)
	}
	if all.Unassigned != 0 || tallySum(all) != 400 {
		t.Errorf("tally without experiment %+v", all)
	}
}

func TestRunBalanceErrors(t *testing.T) {
	f := seeded()
	f.errFor = func(method, user string) error {
		if method == "Mark" && user == "e-7" {
			return &upgrade.Error{Category: upgrade.CategoryAPI, Status: 500, Message: "boom"}
		}
		return nil
	}
	got, err := RunBalance(context.Background(), f, streamBalance(100), BalanceTally{}, BalanceOptions{UserPrefix: "e-"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Errors != 1 || tallySum(got) != 100 || !strings.Contains(got.FirstError, "mark user e-7") {
		t.Errorf("tally %+v", got)
	}

	// A whole batch failing stops the run with nothing committed.
	f = seeded()
	f.errs["Init"] = &upgrade.Error{Category: upgrade.CategoryAPI, Message: "cannot reach UpGrade"}
	commits := 0
	got, err = RunBalance(context.Background(), f, streamBalance(500), BalanceTally{}, BalanceOptions{UserPrefix: "x-",
		Commit: func(BalanceTally) error { commits++; return nil }})
	if err == nil || !strings.Contains(err.Error(), "cannot reach UpGrade") {
		t.Errorf("err = %v", err)
	}
	if got.Done != 0 || commits != 0 {
		t.Errorf("tally %+v after %d commits", got, commits)
	}
	// Dispatch stays within two batches and the pool of the commit point.
	if n := f.count("Init"); n > 2*DefaultBalanceBatchSize+DefaultBalanceConcurrency {
		t.Errorf("%d users ran before the failing batch stopped the run", n)
	}
}

func TestRunBalanceBadInput(t *testing.T) {
	tests := []struct {
		name  string
		p     BalanceParams
		start BalanceTally
		opts  BalanceOptions
		want  string
	}{
		{"no prefix", streamBalance(10), BalanceTally{}, BalanceOptions{}, "user prefix is required"},
		{"no users", streamBalance(0), BalanceTally{}, BalanceOptions{UserPrefix: "x"}, "num_users must be between"},
		{"progress beyond total", streamBalance(10), BalanceTally{Done: 11}, BalanceOptions{UserPrefix: "x"}, "does not fit"},
		{"progress of another size", streamBalance(10), BalanceTally{Done: 5, Total: 20}, BalanceOptions{UserPrefix: "x"}, "is for 20 users"},
	}
	for _, tt := range tests {
		if _, err := RunBalance(context.Background(), seeded(), tt.p, tt.start, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	// Already complete: nothing runs.
	f := seeded()
	done := BalanceTally{Done: 10, Total: 10, Counts: map[string]int{"question-hint-default": 10}}
	got, err := RunBalance(context.Background(), f, streamBalance(10), done, BalanceOptions{UserPrefix: "x"})
	if err != nil || !cmp.Equal(got, done) || f.count("Init") != 0 {
		t.Errorf("complete tally: %+v %v, %d inits", got, err, f.count("Init"))
	}
}

func TestSummarizeBalance(t *testing.T) {
	approx := cmpopts.EquateApprox(0, 1e-9)
	f := seeded()
	tally := BalanceTally{Done: 110, Total: 110, Counts: map[string]int{"question-hint-default": 30, "question-hint-tutorbot": 70, "stray": 2},
		Unassigned: 5, Errors: 3, FirstError: "mark user u-4: boom"}
	res, err := SummarizeBalance(context.Background(), f, streamBalance(110), tally)
	if err != nil {
		t.Fatal(err)
	}
	// chi2 = (30-50)^2/50 + (70-50)^2/50 = 16 with df 1; P(X >= 16) = erfc(sqrt(8)).
	want := &BalanceResult{
		ExperimentID: streamExpID, ExperimentName: "Tutorbot Hints", ExperimentState: upgrade.StateEnrolling,
		Users: 110, Assigned: 102, Unassigned: 5, Errors: 3, FirstError: "mark user u-4: boom",
		Conditions: []ConditionShare{
			{Code: "question-hint-default", Count: 30, Share: 30.0 / 102, ExpectedShare: 0.5, Expected: 51},
			{Code: "question-hint-tutorbot", Count: 70, Share: 70.0 / 102, ExpectedShare: 0.5, Expected: 51},
			{Code: "stray", Count: 2, Share: 2.0 / 102},
		},
		ChiSquare: 16, DF: 1, PValue: math.Erfc(math.Sqrt(8)),
		Warnings: []string{
			`conditions stray are not conditions of experiment "Tutorbot Hints"; left out of the test`,
			"the counts differ from the weights more than chance explains (p = 6.334e-05)",
			"3 of 110 users failed: mark user u-4: boom",
		},
	}
	if diff := cmp.Diff(want, res, approx); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestSummarizeBalanceWarnings(t *testing.T) {
	f := seeded()
	// Math Hints is inactive: everyone got the default.
	p := BalanceParams{NumUsers: 50, Context: "assign-prog", Site: "SelectSection", Target: "absolute_value_plot_equality", ExperimentID: mathHintsID}
	res, err := SummarizeBalance(context.Background(), f, p, BalanceTally{Done: 50, Total: 50, Unassigned: 50})
	if err != nil {
		t.Fatal(err)
	}
	if res.DF != 0 || res.PValue != 1 || !containsStr(res.Warnings, "experiment is not enrolling (state inactive): every user got the default") {
		t.Errorf("result %+v", res)
	}

	// No experiment id and none at the decision point: counts, no test.
	p = BalanceParams{NumUsers: 4, Context: "livehint-ai", Site: "problem-info", Target: "digital"}
	res, err = SummarizeBalance(context.Background(), f, p, BalanceTally{Done: 4, Total: 4, Counts: map[string]int{"a": 4}})
	if err != nil {
		t.Fatal(err)
	}
	if res.DF != 0 || res.ExperimentID != "" || len(res.Conditions) != 1 ||
		!containsStr(res.Warnings, "no experiment has this decision point: there are no weights to compare with") {
		t.Errorf("result %+v", res)
	}

	// No experiment id, one enrolling experiment there: its weights are used.
	p = BalanceParams{NumUsers: 100, Context: "mathstream", Site: "lesson-stream", Target: "question-hint"}
	res, err = SummarizeBalance(context.Background(), f, p, BalanceTally{Done: 100, Total: 100, Counts: map[string]int{"question-hint-default": 52, "question-hint-tutorbot": 48}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExperimentID != streamExpID || res.DF != 1 || res.PValue < 0.6 || len(res.Warnings) != 0 {
		t.Errorf("result %+v", res)
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
