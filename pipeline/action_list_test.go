package pipeline

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// TestGathererKnowsTheRegistry: the gatherer's prompt lists the registered
// actions and set_action_needed's enum holds the names it is given (the
// registered actions and the MCP ones); without names the argument stays
// free.
func TestGathererKnowsTheRegistry(t *testing.T) {
	sys := gathererSystem()
	if strings.Contains(sys, "{{actions}}") || !strings.Contains(sys, "Actions: "+actions.PromptList()+".") {
		t.Errorf("the gatherer's prompt does not list the registered actions:\n%s", sys)
	}
	names := []string{"create_experiment", "mcp__srv__tool"}
	enumOf := func(ts *toolSet) []string {
		var s struct {
			Properties map[string]struct {
				Enum        []string `json:"enum"`
				Description string   `json:"description"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(ts.byName["set_action_needed"].schema, &s); err != nil {
			t.Fatal(err)
		}
		return s.Properties["action"].Enum
	}
	if d := cmp.Diff(names, enumOf(gathererTools(names))); d != "" {
		t.Errorf("enum (-want +got):\n%s", d)
	}
	if e := enumOf(gathererTools(nil)); e != nil {
		t.Errorf("enum without names: %v", e)
	}
	var want []string
	for _, n := range actions.Names() {
		want = append(want, string(n))
	}
	if d := cmp.Diff(want, (&Agent{}).actionNames()); d != "" {
		t.Errorf("actionNames (-registry +got):\n%s", d)
	}
}
