package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// The gatherer learns the actions from the registry (actions.Register),
// read when a prompt or a tool set is made, so that an action registered
// anywhere, even by a test, is offered like the built-in ones.

// gathererSystem is the gatherer's prompt with the registered actions
// listed in their order.
func gathererSystem() string {
	return strings.Replace(gathererPrompt, "{{actions}}", actions.PromptList(), 1)
}

// withEnum gives a tool's string argument the allowed values (none: as it
// is), in place of its description.
func withEnum(values []string, arg string, d *toolDef) *toolDef {
	if len(values) == 0 {
		return d
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(d.schema, &s); err != nil || s.Properties[arg] == nil {
		panic(fmt.Sprintf("tool %s: no argument %s to restrict", d.name, arg)) // programming error, caught by tests
	}
	p := s.Properties[arg]
	p.Description, p.Enum = "", nil
	for _, v := range values {
		p.Enum = append(p.Enum, v)
	}
	raw, err := json.Marshal(&s)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", d.name, err))
	}
	d.schema = raw
	return d
}
