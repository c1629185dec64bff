package pipeline

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/internal/jschema"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// The gatherer learns the actions from the agent's registry (Deps.Actions)
// and is offered them by scope (spec/pipeline.md, "Tool scope"): the
// shared tools plus those of the object the analyzer named, or every tool
// when it named none, or when the action in progress is of another
// object. Each scope's prompt and tool list is made once per agent, on
// first need, and is the same bytes from call to call and turn to turn, so
// provider prompt caches hit.

//go:embed prompts/objects/*.md
var objectNotes embed.FS

// toolScopes are an agent's tool lists and gatherer prompts, made on first
// need and never changed afterwards.
type toolScopes struct {
	mu        sync.Mutex
	gatherer  map[actions.Object]*toolSet
	prompts   map[actions.Object]string
	analyzer  *toolSet
	responder *toolSet
}

// reg is the agent's action set.
func (a *Agent) reg() *actions.Registry { return a.deps.Actions }

// inScope: a tool or action about object o is offered in scope.
func inScope(o, scope actions.Object) bool {
	return scope == actions.ObjectNone || o == actions.ObjectNone || o == scope
}

// scopeOf is the scope of the turn's gathering: the analyzer's object,
// unless the action in progress or pending is of another one, or no action
// or lookup is about it.
func (a *Agent) scopeOf(t *turn) actions.Object {
	scope := t.object
	if !a.reg().Declares(scope) {
		return actions.ObjectNone // none named, or one with no tools yet (metric): every tool
	}
	for _, name := range []string{t.action(), pendingAction(t.pending), pendingAction(t.denied)} {
		if name == "" {
			continue
		}
		if act, ok := a.action(name); ok && !inScope(act.Spec().Object, scope) {
			return actions.ObjectNone
		}
	}
	return scope
}

func pendingAction(p *Pending) string {
	if p == nil || p.Bound == nil {
		return ""
	}
	return p.Bound.Name
}

// actionNames lists the actions the gatherer may choose in a scope: the
// registry's, then the MCP ones (shared).
func (a *Agent) actionNames(scope actions.Object) []string {
	var n []string
	for _, name := range a.reg().InScope(scope) {
		n = append(n, string(name))
	}
	for _, m := range a.mcpActionList() {
		n = append(n, fmt.Sprint(m["action"]))
	}
	return n
}

// gathererSystem is the gatherer's prompt for a scope: the notes of the
// actions in scope that have one, and the notes of the objects in scope.
// The action names are not listed here: get_action_schema's enum holds
// them, once.
func (a *Agent) gathererSystem(scope actions.Object) string {
	a.scopes.mu.Lock()
	defer a.scopes.mu.Unlock()
	if p, ok := a.scopes.prompts[scope]; ok {
		return p
	}
	var notes strings.Builder
	for _, o := range a.reg().Objects() {
		if !inScope(o, scope) {
			continue
		}
		if b, err := objectNotes.ReadFile("prompts/objects/" + string(o) + ".md"); err == nil {
			notes.WriteString("\n")
			notes.Write(b)
		}
	}
	actionNotes := ""
	if n := a.reg().PromptNotes(scope); n != "" {
		actionNotes = "\nActions: " + n + ".\n"
	}
	p := strings.NewReplacer("{{notes}}", actionNotes, "{{objects}}", notes.String()).Replace(gathererPrompt)
	if a.scopes.prompts == nil {
		a.scopes.prompts = map[actions.Object]string{}
	}
	a.scopes.prompts[scope] = p
	return p
}

// gTools is the gatherer's tool list for a scope. A call of a tool of
// another scope still runs (beyond): a model may name one it saw earlier.
func (a *Agent) gTools(scope actions.Object) *toolSet {
	full := a.gathererSet(actions.ObjectNone, nil)
	if scope == actions.ObjectNone {
		return full
	}
	return a.gathererSet(scope, full)
}

func (a *Agent) gathererSet(scope actions.Object, full *toolSet) *toolSet {
	a.scopes.mu.Lock()
	defer a.scopes.mu.Unlock()
	if ts := a.scopes.gatherer[scope]; ts != nil {
		return ts
	}
	var defs []*toolDef
	for _, d := range lookupTools() {
		if inScope(d.object, scope) {
			defs = append(defs, d)
		}
	}
	for _, l := range a.reg().Lookups() {
		if inScope(l.Object, scope) {
			defs = append(defs, registryLookup(l))
		}
	}
	defs = append(defs, mcpReadTools(a.mcp)...)
	var builtin []string
	for _, n := range a.reg().InScope(scope) {
		builtin = append(builtin, string(n))
	}
	defs = append(defs, actionSchemaTool(builtin))
	defs = append(defs, stateTools()...)
	ts := newToolSet(defs...)
	ts.beyond = full
	if a.scopes.gatherer == nil {
		a.scopes.gatherer = map[actions.Object]*toolSet{}
	}
	a.scopes.gatherer[scope] = ts
	return ts
}

// registryLookup offers a lookup declared in the registry as a gatherer
// tool; its result is kept under gathered_info.<name>.
func registryLookup(l actions.LookupTool) *toolDef {
	return &toolDef{name: l.Name, desc: l.Description, readOnly: true, object: l.Object, schema: l.Schema(),
		run: func(ctx context.Context, t *turn, raw json.RawMessage) (any, error) {
			res, err := l.Run(ctx, t.a.env(t.api(), t.sess.cp.SessionID), raw)
			var pe *actions.ParseError
			if errors.As(err, &pe) {
				return nil, &toolInputError{msg: err.Error()}
			}
			if err != nil {
				return nil, err
			}
			t.update(func(s *State) { s.setInfo(l.Name, "", res) })
			return res, nil
		}}
}

// aTools is the analyzer's tool list: analyze_user_request, whose object
// enum lists the objects of the registry, and the few short lookups it may
// call with it. A call of any other read-only gatherer tool is taken as a
// lookup too (beyond).
func (a *Agent) aTools() *toolSet {
	full := a.gTools(actions.ObjectNone)
	a.scopes.mu.Lock()
	defer a.scopes.mu.Unlock()
	if a.scopes.analyzer == nil {
		var objects []string
		for _, o := range a.reg().Objects() {
			objects = append(objects, string(o))
		}
		defs := []*toolDef{withEnum(objects, "object", analyzeTool())}
		for _, name := range analyzerLookups {
			defs = append(defs, lookupTool(name))
		}
		a.scopes.analyzer = newToolSet(defs...)
		a.scopes.analyzer.beyond = full
	}
	return a.scopes.analyzer
}

// rTools is the responder's tool list.
func (a *Agent) rTools() *toolSet {
	a.scopes.mu.Lock()
	defer a.scopes.mu.Unlock()
	if a.scopes.responder == nil {
		a.scopes.responder = responderTools()
	}
	return a.scopes.responder
}

// withEnum gives a tool's string argument the allowed values (none: as it
// is), in place of its description. A nullable argument keeps null among
// them.
func withEnum(values []string, arg string, d *toolDef) *toolDef {
	if len(values) == 0 {
		return d
	}
	var s jschema.Node
	if err := json.Unmarshal(d.schema, &s); err != nil || s.Properties.Get(arg) == nil {
		panic(fmt.Sprintf("tool %s: no argument %s to restrict", d.name, arg)) // programming error, caught by tests
	}
	p := s.Properties.Get(arg)
	p.Description, p.Enum = "", nil
	for _, v := range values {
		p.Enum = append(p.Enum, v)
	}
	if slices.Contains(p.Types(), "null") {
		p.Enum = append(p.Enum, nil)
	}
	raw, err := json.Marshal(&s)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", d.name, err))
	}
	d.schema = raw
	return d
}
