package actions

import (
	"context"
	"testing"
	"time"
)

// TestImportsReconcile: after a crash, each import says whether its
// objects were made since it started (from what the server holds, not
// from the checkpoint): not done before the write, done after it, on the
// simulator.
func TestImportsReconcile(t *testing.T) {
	ctx := context.Background()
	src := startSim(t, "6.5.0")
	_, raw := run(t, src, CreateSegmentParams{Name: "reconcile seg", Context: "assign-prog", Users: []string{"u1"}})
	seg := decode[SegmentResult](t, raw)
	_, raw = run(t, src, CreateFeatureFlagParams{Name: "Reconcile flag", Key: "RECONCILE_FLAG", Context: "assign-prog"})
	fl := decode[FlagResult](t, raw)
	_, raw = run(t, src, parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Reconcile exp","context":"assign-prog",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`))
	exp := decode[ExperimentResult](t, raw)
	flagFile, err := src.ExportFlag(ctx, fl.ID)
	if err != nil {
		t.Fatal(err)
	}
	segFile, err := src.ExportSegments(ctx, []string{seg.ID})
	if err != nil {
		t.Fatal(err)
	}
	expFile, err := src.ExportExperiments(ctx, []string{exp.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Params{
		ImportFeatureFlagsParams{Files: []ImportFileParam{{Name: "flag.json", Content: string(flagFile)}}},
		ImportSegmentsParams{Files: []ImportFileParam{{Name: "seg.json", Content: string(segFile)}}},
		ImportExperimentsParams{Files: []ImportFileParam{{Name: "exp.json", Content: string(expFile)}}},
	} {
		t.Run(string(p.Action()), func(t *testing.T) {
			dst := startSim(t, "6.5.0")
			started := time.Now().Add(-time.Second)
			b := mustBound(p)
			r, err := b.Reconcile(ctx, Env{API: dst}, "conf-1", started)
			if err != nil || r.Outcome != OutcomeNotDone {
				t.Fatalf("before the write: %+v, %v; want %s", r, err, OutcomeNotDone)
			}
			run(t, dst, p)
			r, err = b.Reconcile(ctx, Env{API: dst}, "conf-1", started)
			if err != nil || r.Outcome != OutcomeDone || len(r.Result) == 0 || r.Note == "" {
				t.Fatalf("after the write: %+v, %v; want %s with a result", r, err, OutcomeDone)
			}
		})
	}
}
