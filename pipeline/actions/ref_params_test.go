package actions

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestRefParamsTyped: references resolve on the typed value, at the same
// paths and with the same reach as in the params' JSON: every item of a
// list, nested structs and pointers; a member the JSON leaves out (nil,
// or empty and omitempty) is not offered to the resolver.
func TestRefParamsTyped(t *testing.T) {
	type item struct {
		ID string `json:"id" ref:"segment"`
	}
	type params struct {
		Items []item    `json:"items"`
		IDs   *[]string `json:"ids,omitempty" ref:"segment"`
		Inner *struct {
			Flag string `json:"flag_id" ref:"flag"`
		} `json:"inner,omitempty"`
		Opt     string `json:"opt,omitempty" ref:"segment"`
		Plain   string `json:"plain" ref:"segment"`
		Context string `json:"context"`
		Kind    string `json:"kind"`
	}
	refs := refsOf(reflectType[params](), "")
	var p params
	if err := json.Unmarshal([]byte(`{"items":[{"id":"Gold"},{"id":"x-1"}],"ids":["Gold"],"inner":{"flag_id":"Beta"},"context":"mobile"}`), &p); err != nil {
		t.Fatal(err)
	}
	var seen []string
	upper := func(v string) (string, error) {
		seen = append(seen, v)
		if v == "x-1" {
			return v, nil
		}
		return strings.ToUpper(v), nil
	}
	view := refParamsOf(&p)
	changed := false
	for _, r := range refs {
		ch, err := view.resolve(r, upper)
		if err != nil {
			t.Fatal(err)
		}
		changed = changed || ch
	}
	got, _ := json.Marshal(p)
	if want := `{"items":[{"id":"GOLD"},{"id":"x-1"}],"ids":["GOLD"],"inner":{"flag_id":"BETA"},"plain":"","context":"mobile","kind":""}`; !changed || string(got) != want {
		t.Errorf("resolved (changed %v): %s, want %s", changed, got, want)
	}
	// "plain" is in the JSON as "" and is offered; "opt" (omitempty) is not.
	if want := "Gold x-1 Gold Beta "; strings.Join(seen, " ") != want {
		t.Errorf("offered %q, want %q", strings.Join(seen, " "), want)
	}
	if view.str("context") != "mobile" || view.str("nothing") != "" {
		t.Errorf("context %q", view.str("context"))
	}
	if !view.setStr("kind", "include") || p.Kind != "include" || view.setStr("nothing", "x") {
		t.Errorf("setStr: kind %q", p.Kind)
	}
	if _, err := view.resolve(Ref{Path: "plain"}, func(string) (string, error) { return "", errRefsUnchanged }); err == nil {
		t.Error("a resolver's error was dropped")
	}
}

// TestResolveBoundFillsListKind: a list action that names its flag by key
// and gives no kind gets both from the flag, in one bind on the typed value.
func TestResolveBoundFillsListKind(t *testing.T) {
	ctx := context.Background()
	f := flagged()
	b, err := Bind(string(RemoveFeatureFlagList), []byte(`{"flag_id":"math_hints","list_id":"`+excListID+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	binds := 0
	remove := OnBind(func(string) { binds++ })
	got, err := ResolveBound(ctx, f, b)
	remove()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"flag_id":"` + mathFlagID + `","kind":"exclude","list_id":"` + excListID + `"}`
	if string(got.Params) != want || binds != 1 {
		t.Errorf("got %s in %d binds, want %s in 1", got.Params, binds, want)
	}
	// Ids already: nothing is bound again.
	binds = 0
	remove = OnBind(func(string) { binds++ })
	again, err := ResolveBound(ctx, f, got)
	remove()
	if err != nil || again != got || binds != 0 {
		t.Errorf("ids already: %v, same bound %v, %d binds", err, again == got, binds)
	}
}
