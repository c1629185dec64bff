package sim

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestExportImportBetweenSimulators: an export of one simulator imported
// into another makes new inactive experiments with new ids; importing it
// again makes a twin; validation tells warning and incompatible files.
func TestExportImportBetweenSimulators(t *testing.T) {
	ctx := context.Background()
	client := func(seed int64, version string) *upgrade.Client {
		srv, err := Start(Options{Seed: seed, Version: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		c, err := upgrade.New(upgrade.Config{BaseURL: srv.URL(), Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := client(7, ""), client(8, "6.5.1")
	src := &upgrade.Experiment{Name: "Portable", Context: []string{"assign-prog"}, State: upgrade.StateInactive,
		AssignmentUnit: "individual", ConsistencyRule: "individual", PostExperimentRule: "continue", FilterMode: "includeAll", Type: "Simple",
		Conditions: []upgrade.Condition{{ID: upgrade.NewID(), ConditionCode: "control", AssignmentWeight: 50, Order: 1}, {ID: upgrade.NewID(), ConditionCode: "variant", AssignmentWeight: 50, Order: 2}},
		Partitions: []upgrade.DecisionPoint{{ID: upgrade.NewID(), Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1}}}
	created, err := a.CreateExperiment(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := a.ExportExperiments(ctx, []string{created.ID, upgrade.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	var exported []json.RawMessage
	if err := json.Unmarshal(raw, &exported); err != nil || len(exported) != 1 {
		t.Fatalf("export: %d items, %v", len(exported), err)
	}
	files := []upgrade.ImportFile{{FileName: "portable.json", FileContent: string(exported[0])},
		{FileName: "bad.json", FileContent: "{"}, {FileName: "old.json", FileContent: `{"name": "x"}`}}
	res, err := b.ValidateExperimentImport(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{upgrade.Warning, upgrade.Incompatible, upgrade.Incompatible}
	for i, r := range res {
		if r.CompatibilityType != want[i] {
			t.Errorf("%s: %s (%s), want %s", r.FileName, r.CompatibilityType, r.ErrorText(), want[i])
		}
	}
	// a file without context is answered {} (6.5.0), which the client reads as incompatible
	if res[1].ErrorText() != "Invalid JSON" || res[2].Error != nil || res[2].FileName != "" {
		t.Errorf("errors: %q %v", res[1].ErrorText(), res[2].Error)
	}
	for range 2 {
		if _, err := b.ImportExperiments(ctx, files[:1]); err != nil {
			t.Fatal(err)
		}
	}
	all, err := b.Experiments(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("imported %d, %v", len(all), err)
	}
	for _, e := range all {
		if e.Name != "Portable" || e.ID == created.ID || e.State != upgrade.StateInactive || e.Conditions[0].ID == created.Conditions[0].ID {
			t.Errorf("imported %+v", e)
		}
	}
	if all[0].ID == all[1].ID {
		t.Error("the twin has the same id")
	}
}
