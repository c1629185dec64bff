package actions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestFactorialComesBackFromItsExport: UpGrade 6.5 exports a factorial
// level made without a payload as {"type":"string","value":null} and its
// own import refuses that, so an exported factorial cannot be imported as
// it is (checked on the simulator here, and on a real 6.5 with
// UPGRADE_REAL_URL). import_experiments leaves those payloads out, says so
// in the plan, and the copy reads back with the source's levels and
// payloads.
func TestFactorialComesBackFromItsExport(t *testing.T) {
	t.Run("simulator", func(t *testing.T) {
		factorialRoundTrip(t, startSim(t, "6.5.0"), startSim(t, "6.5.0"), "sim")
	})
	t.Run("real", func(t *testing.T) {
		u := strings.TrimRight(os.Getenv("UPGRADE_REAL_URL"), "/")
		if u == "" {
			t.Skip("UPGRADE_REAL_URL not set: no real UpGrade server (see docs/upgrade-real.md)")
		}
		c, err := upgrade.New(upgrade.Config{BaseURL: u, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var rb [4]byte
		_, _ = rand.Read(rb[:])
		factorialRoundTrip(t, c, c, "real-"+hex.EncodeToString(rb[:]))
	})
}

func factorialRoundTrip(t *testing.T, src, dst *upgrade.Client, tag string) {
	ctx := context.Background()
	name := "Roundtrip 2x2 " + tag
	p := parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"`+name+`","context":"assign-prog","design":"factorial",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],
		"factors":[{"name":"Color","levels":[{"name":"Red","payload":"#f00"},{"name":"Blue"}]},{"name":"Shape","levels":["Circle","Square"]}]}`)
	_, raw := run(t, src, p)
	created := decode[ExperimentResult](t, raw)
	t.Cleanup(func() { _, _ = src.DeleteExperiment(context.Background(), created.ID) })
	export, err := src.ExportExperiments(ctx, []string{created.ID})
	if err != nil {
		t.Fatal(err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(export, &list); err != nil || len(list) != 1 {
		t.Fatalf("export: %v, %d experiments", err, len(list))
	}

	// The trap: the server refuses its own export.
	res, err := dst.ValidateExperimentImport(ctx, []upgrade.ImportFile{{FileName: "as-exported.json", FileContent: string(list[0])}})
	if err != nil || len(res) != 1 || res[0].CompatibilityType != upgrade.Incompatible || !strings.Contains(res[0].ErrorText(), "payload.value") {
		t.Fatalf("the export as it is: %+v, %v; want incompatible on payload.value", res, err)
	}

	imp := ImportExperimentsParams{Files: []ImportFileParam{{Name: "hints.json", Content: string(list[0])}}}
	before, err := dst.Experiments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := run(t, dst, imp)
	if !strings.Contains(plan.Message, "3 factor level payload(s) without a value are left out") {
		t.Errorf("plan does not say what is left out:\n%s", plan.Message)
	}
	after, err := dst.Experiments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var copyID string
	for _, e := range after {
		if e.Name == name && e.ID != created.ID && !containsID(before, e.ID) {
			copyID = e.ID
		}
	}
	if copyID == "" {
		t.Fatalf("no new experiment named %q after the import", name)
	}
	t.Cleanup(func() { _, _ = dst.DeleteExperiment(context.Background(), copyID) })
	e, err := dst.Experiment(ctx, copyID)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != "inactive" || e.Type != upgrade.TypeFactorial || len(e.Conditions) != 4 {
		t.Fatalf("copy: state %s, type %s, %d conditions", e.State, e.Type, len(e.Conditions))
	}
	got := map[string]string{}
	for _, f := range e.Factors {
		for _, l := range f.Levels {
			got[f.Name+"/"+l.Name] = l.PayloadText()
		}
	}
	want := map[string]string{"Color/Red": "#f00", "Color/Blue": "", "Shape/Circle": "", "Shape/Square": ""}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("level %s: payload %q (present %v), want %q; all %v", k, g, ok, v, got)
		}
	}
}

func containsID(es []upgrade.Experiment, id string) bool {
	for _, e := range es {
		if e.ID == id {
			return true
		}
	}
	return false
}

// TestWithoutNullPayloads: only a factorial level payload whose value is
// null goes; a file with none is sent byte for byte as it came.
func TestWithoutNullPayloads(t *testing.T) {
	same := `{"name": "x", "factors": [{"name":"A","levels":[{"name":"a1","payload":{"type":"string","value":"v"}},{"name":"a2"}]}]}`
	if got, n := withoutNullPayloads(same); got != same || n != 0 {
		t.Errorf("nothing to leave out: %d, %s", n, got)
	}
	for _, s := range []string{`not json`, `[1,2]`, `{"factors": null}`, `{"factors": "x"}`, `{"factors":[{"levels":7}]}`} {
		if got, n := withoutNullPayloads(s); got != s || n != 0 {
			t.Errorf("%s: %d, %s", s, n, got)
		}
	}
	in := `{"name":"x","backendVersion":"6.5.0","factors":[{"name":"A","levels":[{"name":"a1","payload":{"type":"string","value":null}},{"name":"a2","payload":{"type":"string"}},{"name":"a3","payload":{"type":"string","value":"v"}}]}]}`
	got, n := withoutNullPayloads(in)
	if n != 2 {
		t.Fatalf("left out %d, want 2: %s", n, got)
	}
	var e struct {
		Name    string `json:"name"`
		Version string `json:"backendVersion"`
		Factors []struct {
			Levels []map[string]json.RawMessage `json:"levels"`
		} `json:"factors"`
	}
	if err := json.Unmarshal([]byte(got), &e); err != nil {
		t.Fatal(err)
	}
	ls := e.Factors[0].Levels
	if e.Name != "x" || e.Version != "6.5.0" || len(ls) != 3 || ls[0]["payload"] != nil || ls[1]["payload"] != nil || string(ls[2]["payload"]) != `{"type":"string","value":"v"}` {
		t.Errorf("result: %s", got)
	}
}
