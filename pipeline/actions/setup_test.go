package actions

import (
	"errors"
	"testing"
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
