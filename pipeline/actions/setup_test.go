package actions

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestBindCreate: each setup object is created by its create_ action, and
// an object nothing creates is an unknown action.
func TestBindCreate(t *testing.T) {
	for object, raw := range map[string]string{
		"experiment":   `{"name":"Math Hints","context":"assign-prog"}`,
		"feature_flag": `{"key":"hints","name":"Hints","context":"assign-prog"}`,
		"segment":      `{"name":"Pilot","context":"assign-prog"}`,
	} {
		b, err := BindCreate(object, []byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", object, err)
		}
		if want := Name("create_" + object); b.Name != string(want) {
			t.Errorf("%s: bound %s, want %s", object, b.Name, want)
		}
	}
	if _, err := BindCreate("metric_of_nothing", []byte(`{}`)); !errors.Is(err, ErrUnknownAction) {
		t.Errorf("unknown object: %v, want ErrUnknownAction", err)
	}
}

// TestResolveBound: a setup or a model names objects as people do; the
// bound value holds their ids after one resolution (experiments by name in
// any case with stray blanks, segments by name in the flag's context),
// and a name that means nothing is an error naming the param.
func TestResolveBound(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	f.add(&upgrade.Experiment{ID: fakeID(1, 1), Name: "Math Hints", Context: []string{"assign-prog"}})
	f.add(&upgrade.Experiment{ID: fakeID(1, 2), Name: "Math Hints v2", Context: []string{"assign-prog"}})
	b, err := Bind(string(DeleteExperiment), []byte(`{"experiment_id":"  math hints "}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ResolveBound(ctx, f, b)
	if err != nil || !strings.Contains(string(got.Params), fakeID(1, 1)) {
		t.Fatalf("experiment by name: %s %v", got.Params, err)
	}
	b, _ = Bind(string(DeleteExperiment), []byte(`{"experiment_id":"Physics"}`))
	if _, err := ResolveBound(ctx, f, b); err == nil || !strings.Contains(err.Error(), `experiment_id: no experiment matches "Physics"`) {
		t.Fatalf("unknown experiment: %v", err)
	}
	b, _ = Bind(string(DeleteExperiment), []byte(`{"experiment_id":"Math"}`))
	if _, err := ResolveBound(ctx, f, b); err == nil || !strings.Contains(err.Error(), `"Math" matches 2 experiments`) {
		t.Fatalf("ambiguous experiment: %v", err)
	}

	f.addSegment(upgrade.SegmentRecord{ID: fakeID(2, 1), Name: "pilot schools", Context: "assign-prog", Type: upgrade.SegmentPublic})
	f.addSegment(upgrade.SegmentRecord{ID: fakeID(2, 2), Name: "pilot schools", Context: "mobile", Type: upgrade.SegmentPublic})
	b, err = BindCreate("feature_flag", []byte(`{"key":"hints","name":"Hints","context":"mobile","include_lists":[{"segment_ids":["Pilot Schools"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err = ResolveBound(ctx, f, b)
	if err != nil || !strings.Contains(string(got.Params), fakeID(2, 2)) {
		t.Fatalf("segment by name in the flag's context: %s %v", got.Params, err)
	}
}
