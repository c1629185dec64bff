package actions

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzParse feeds arbitrary params to every action: Parse never panics, and
// whatever it accepts has a canonical form that is a fixed point and goes
// through Validate (and BuildPlan when valid) without panicking.
func FuzzParse(f *testing.F) {
	seeds := []struct {
		action uint8
		raw    string
	}{
		{0, `{"name":"A","context":"assign-prog","decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":[{"code":"control","weight":50},{"code":"variant","weight":50}]}`},
		{1, `{"experiment_id":"` + mathHintsID + `","conditions":[{"code":"control","weight":70},{"code":"variant","weight":30}],"tags":[]}`},
		{2, `{"experiment_id":"` + mathHintsID + `","status":"running"}`},
		{3, `{"experiment_id":"` + mathHintsID + `"}`},
		{4, `{"user_id":"u","group":{"classId":["c1"]},"working_group":{"classId":"c1"}}`},
		{5, `{"user_id":"u","context":"assign-prog"}`},
		{6, `{"user_id":"u","decision_point":{"site":"SelectSection"},"assigned_condition":null}`},
		{7, `{"user_id":"u","context":"assign-prog","site":"SelectSection","target":"analyzing_step_functions"}`},
		{8, `{"num_users":5,"context":"mathstream","site":"lesson-stream","target":"question-hint"}`},
		{0, `{"conditions":[{"code":1}],"x":{}}`},
		{8, `{"num_users":1e400}`},
		{2, `[`},
	}
	for _, s := range seeds {
		f.Add(s.action, []byte(s.raw))
	}
	names := Builtin().Names()
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		name := names[int(which)%len(names)]
		p, err := Parse(string(name), raw)
		if err != nil {
			return
		}
		canon, err := Canonical(p)
		if err != nil {
			t.Fatalf("Canonical of accepted params %s: %v", raw, err)
		}
		p2, err := Parse(string(name), canon)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", canon, err)
		}
		again, err := Canonical(p2)
		if err != nil || string(again) != string(canon) {
			t.Fatalf("canonical form is not stable: %s / %s (%v)", canon, again, err)
		}
		if !json.Valid(canon) {
			t.Fatalf("canonical form is not JSON: %s", canon)
		}
		if bp, ok := p.(BalanceParams); ok && bp.NumUsers > 50 {
			return // keep the fuzz loop fast: BuildPlan does not run users anyway
		}
		probs, err := Validate(context.Background(), seeded(), p)
		if err != nil {
			t.Fatalf("Validate against the fake: %v", err)
		}
		if len(probs) == 0 {
			if _, err := BuildPlan(context.Background(), seeded(), p); err != nil {
				t.Fatalf("BuildPlan of valid params %s: %v", canon, err)
			}
		}
	})
}
