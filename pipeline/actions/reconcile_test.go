package actions

import (
	"context"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	started := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC) // the fake stamps creates at this instant
	update := UpdateExperimentParams{ExperimentID: mathHintsID, Conditions: &[]ConditionParam{{Code: "control", Weight: ptr(80.0)}, {Code: "variant", Weight: ptr(20.0)}}}

	tests := []struct {
		name    string
		p       Params
		setup   func(t *testing.T, f *fakeAPI) // the interrupted call, when it got through
		started time.Time
		want    string
	}{
		{name: "create not made", p: validCreate(), want: OutcomeNotDone},
		{name: "create made", p: validCreate(), setup: func(t *testing.T, f *fakeAPI) { mustExecuteKey(t, f, validCreate(), "conf-1") }, want: OutcomeDone},
		{name: "create made, then renamed and started", p: validCreate(), setup: func(t *testing.T, f *fakeAPI) {
			res := decode[ExperimentResult](t, mustExecuteKey(t, f, validCreate(), "conf-1"))
			mustExecute(t, f, UpdateExperimentParams{ExperimentID: res.ID, Name: ptr("Renamed")})
			mustExecute(t, f, UpdateExperimentStatusParams{ExperimentID: res.ID, Status: "enrolling"})
		}, want: OutcomeDone},
		{name: "create: a twin made by someone else", p: validCreate(),
			setup: func(t *testing.T, f *fakeAPI) { mustExecute(t, f, validCreate()) }, want: OutcomeUnknown},
		{name: "create: same name in another context", p: create(func(p *CreateExperimentParams) { p.Name = "Tutorbot Hints" }), want: OutcomeUnknown},
		{name: "update not made", p: update, want: OutcomeNotDone},
		{name: "update made", p: update, setup: func(t *testing.T, f *fakeAPI) { mustExecute(t, f, update) }, want: OutcomeDone},
		{name: "update of a vanished experiment", p: UpdateExperimentParams{ExperimentID: unknownID, Name: ptr("x")}, want: OutcomeUnknown},
		{name: "status not made", p: UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "enrolling"}, want: OutcomeNotDone},
		{name: "status made", p: UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "running"}, setup: func(t *testing.T, f *fakeAPI) {
			mustExecute(t, f, UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "enrolling"})
		}, want: OutcomeDone},
		{name: "delete not made", p: DeleteExperimentParams{ExperimentID: mathHintsID}, want: OutcomeNotDone},
		{name: "delete made", p: DeleteExperimentParams{ExperimentID: mathHintsID}, setup: func(t *testing.T, f *fakeAPI) {
			mustExecute(t, f, DeleteExperimentParams{ExperimentID: mathHintsID})
		}, want: OutcomeDone},
		{name: "init is repeated", p: InitExperimentUserParams{UserID: "u"}, want: OutcomeRepeat},
		{name: "assign is repeated", p: GetDecisionPointAssignmentsParams{UserID: "u", Context: "assign-prog"}, want: OutcomeRepeat},
		{name: "mark is repeated", p: MarkDecisionPointParams{UserID: "u", DecisionPoint: SiteTarget{Site: "SelectSection"}}, want: OutcomeRepeat},
		{name: "visit is repeated", p: VisitDecisionPointParams{UserID: "u", Context: "assign-prog", Site: "SelectSection", Target: "absolute_value_plot_equality"}, want: OutcomeRepeat},
		{name: "balance re-attaches to its job", p: BalanceParams{NumUsers: 5, Context: "mathstream", Site: "lesson-stream", Target: "question-hint"}, want: OutcomeRepeat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := seeded()
			if tt.setup != nil {
				tt.setup(t, f)
			}
			writes := f.count("CreateExperiment") + f.count("UpdateExperiment") + f.count("SetState") + f.count("DeleteExperiment") + f.count("Init") + f.count("Mark")
			st := tt.started
			if st.IsZero() {
				st = started
			}
			r, err := mustBound(tt.p).Reconcile(ctx, Env{API: f}, "conf-1", st)
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != tt.want {
				t.Errorf("outcome %s (%s), want %s", r.Outcome, r.Note, tt.want)
			}
			if r.Note == "" {
				t.Error("no note")
			}
			if r.Outcome == OutcomeDone && len(r.Result) == 0 {
				t.Error("done without a result")
			}
			after := f.count("CreateExperiment") + f.count("UpdateExperiment") + f.count("SetState") + f.count("DeleteExperiment") + f.count("Init") + f.count("Mark")
			if after != writes {
				t.Errorf("Reconcile wrote to the server (%d -> %d writes)", writes, after)
			}
		})
	}
}

func TestReconcileCreateResult(t *testing.T) {
	f := newFake()
	res := decode[ExperimentResult](t, mustExecuteKey(t, f, validCreate(), "conf-7"))
	r, err := mustBound(validCreate()).Reconcile(context.Background(), Env{API: f}, "conf-7", time.Date(2025, 3, 4, 10, 0, 30, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if got := decode[ExperimentResult](t, r.Result); got.ID != res.ID {
		t.Errorf("reconciled id %s, created %s", got.ID, res.ID)
	}
}

func TestReconcileAPIError(t *testing.T) {
	for _, tt := range []struct {
		method string
		p      Params
	}{
		{"ExperimentNames", validCreate()},
		{"Experiment", DeleteExperimentParams{ExperimentID: mathHintsID}},
		{"Experiment", UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "enrolling"}},
	} {
		f := seeded()
		f.errs[tt.method] = &upgrade.Error{Category: upgrade.CategoryAPI, Status: 503}
		if _, err := Reconcile(context.Background(), f, tt.p, time.Now()); upgrade.CategoryOf(err) != upgrade.CategoryAPI {
			t.Errorf("%s: err = %v, want an api error", tt.p.Action(), err)
		}
	}
}
