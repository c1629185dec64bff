package scenario

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"go.yaml.in/yaml/v3"
)

// outcome is what one step produced.
type outcome struct {
	res      *pipeline.Result
	err      error
	exitCode int
}

func (o outcome) status() string {
	if o.res == nil {
		return "(no result)"
	}
	return string(o.res.Status)
}

// backendState is the backend as the expectations see it.
type backendState struct {
	experiments []upgrade.Experiment
	flags       flagState                                    // read only when an expectation needs it
	results     resultsState                                 // likewise (setup_metrics.go)
	user        func(id string) (upgrade.InitResponse, bool) // nil when the backend cannot tell
	enrollment  func(id string) (*upgrade.EnrollmentStats, error)
}

// check compares one step's outcome with its expectations and returns one
// readable line per mismatch.
func check(e Expect, o outcome, be *backendState) []string {
	var out []string
	fail := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	res := o.res
	if o.err != nil && e.ExitCode == nil && e.Status == nil {
		fail("the turn failed: %v (expect status or exit_code to make this expected)", o.err)
	}
	if e.Status != nil && o.status() != *e.Status {
		fail("status: expected %s, got %s%s", *e.Status, o.status(), errNote(o.err))
	}
	if e.ExitCode != nil && o.exitCode != *e.ExitCode {
		fail("exit_code: expected %d, got %d%s", *e.ExitCode, o.exitCode, errNote(o.err))
	}
	if res == nil {
		if needsResult(e) {
			fail("no turn result to check: %v", o.err)
		}
		return out
	}
	if e.Trace != nil && !slices.Equal(*e.Trace, res.Trace) {
		fail("trace: expected [%s], got [%s]", strings.Join(*e.Trace, ", "), strings.Join(res.Trace, ", "))
	}
	if e.LLMCalls != nil && res.Usage.LLMCalls != *e.LLMCalls {
		fail("llm_calls: expected %d, got %d", *e.LLMCalls, res.Usage.LLMCalls)
	}
	for _, s := range e.ResponseContains {
		if !strings.Contains(res.Response, s) {
			fail("response_contains: %q is not in the response %s", s, excerpt(res.Response))
		}
	}
	for _, pat := range e.ResponseMatches {
		re, err := regexp.Compile(pat)
		if err != nil {
			fail("response_matches: %q: %v", pat, err)
			continue
		}
		if !re.MatchString(res.Response) {
			fail("response_matches: /%s/ does not match the response %s", pat, excerpt(res.Response))
		}
	}
	if c := e.Confirmation; c != nil {
		out = append(out, checkConfirmation(c, res.Confirmation)...)
	}
	if e.Actions != nil {
		out = append(out, checkActions(*e.Actions, res.Actions)...)
	}
	if e.Errors != nil {
		out = append(out, checkErrors(*e.Errors, res.Errors)...)
	}
	if e.HasOutput {
		var got any
		if res.Output != nil {
			got = jsonValue(res.Output)
		}
		out = append(out, subset("output", e.Output, got)...)
	}
	if j := e.Job; j != nil {
		switch {
		case res.Job == nil:
			fail("job: expected a job (state %s), got none", j.State)
		default:
			if j.State != "" && string(res.Job.State) != j.State {
				fail("job.state: expected %s, got %s", j.State, res.Job.State)
			}
			done, total := 0, 0
			if res.Job.Progress != nil {
				done, total = res.Job.Progress.Done, res.Job.Progress.Total
			}
			if j.Done != nil && done != *j.Done {
				fail("job.done: expected %d, got %d", *j.Done, done)
			}
			if j.Total != nil && total != *j.Total {
				fail("job.total: expected %d, got %d", *j.Total, total)
			}
		}
	}
	if e.TerminationReason != nil && !strings.Contains(res.TerminationReason, *e.TerminationReason) {
		fail("termination_reason: expected it to contain %q, got %q", *e.TerminationReason, res.TerminationReason)
	}
	if b := e.Backend; b != nil {
		out = append(out, checkBackend(b, be)...)
	}
	return out
}

func needsResult(e Expect) bool {
	return e.Trace != nil || e.LLMCalls != nil || len(e.ResponseContains) > 0 || len(e.ResponseMatches) > 0 ||
		e.Confirmation != nil || e.Actions != nil || e.Errors != nil || e.HasOutput || e.Job != nil || e.TerminationReason != nil
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (error: %v)", err)
}

// excerpt quotes a response for a failure message, shortened.
func excerpt(s string) string {
	const max = 300
	r := []rune(s)
	if len(r) > max {
		s = string(r[:max]) + "..."
	}
	return fmt.Sprintf("%q", s)
}

func checkConfirmation(c *ExpectConfirmation, got *pipeline.ConfirmationOut) []string {
	if got == nil {
		return []string{fmt.Sprintf("confirmation: expected a pending %s, got none", orAny(c.Action))}
	}
	var out []string
	if c.Action != "" && got.Action != c.Action {
		out = append(out, fmt.Sprintf("confirmation.action: expected %s, got %s", c.Action, got.Action))
	}
	if c.Destructive != nil && got.Destructive != *c.Destructive {
		out = append(out, fmt.Sprintf("confirmation.destructive: expected %t, got %t", *c.Destructive, got.Destructive))
	}
	for _, s := range c.MessageContains {
		if !strings.Contains(got.Message, s) {
			out = append(out, fmt.Sprintf("confirmation.message_contains: %q is not in the message %s", s, excerpt(got.Message)))
		}
	}
	return out
}

func orAny(s string) string {
	if s == "" {
		return "action"
	}
	return s
}

func checkActions(want []ExpectAction, got []pipeline.ActionOut) []string {
	var out []string
	if len(want) != len(got) {
		names := make([]string, len(got))
		for i, a := range got {
			names[i] = a.Action + ":" + a.Status
		}
		return []string{fmt.Sprintf("actions: expected %d, got %d [%s]", len(want), len(got), strings.Join(names, ", "))}
	}
	for i, w := range want {
		g := got[i]
		p := fmt.Sprintf("actions[%d]", i)
		if g.Action != w.Action {
			out = append(out, fmt.Sprintf("%s.action: expected %s, got %s", p, w.Action, g.Action))
			continue
		}
		if w.Status != "" && g.Status != w.Status {
			out = append(out, fmt.Sprintf("%s.status: expected %s, got %s%s", p, w.Status, g.Status, note(g.Error)))
		}
		if w.ParamsSubset != nil {
			out = append(out, subset(p+".params", w.ParamsSubset, rawValue(g.Params))...)
		}
		if w.ResultSubset != nil {
			out = append(out, subset(p+".result", w.ResultSubset, rawValue(g.Result))...)
		}
		if w.ErrorContains != "" && !strings.Contains(g.Error, w.ErrorContains) {
			out = append(out, fmt.Sprintf("%s.error: expected it to contain %q, got %q", p, w.ErrorContains, g.Error))
		}
	}
	return out
}

func note(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func checkErrors(want []ExpectError, got []pipeline.ErrorEntry) []string {
	if len(want) != len(got) {
		lines := make([]string, len(got))
		for i, e := range got {
			lines[i] = e.Type + ": " + e.Message
		}
		return []string{fmt.Sprintf("errors: expected %d, got %d [%s]", len(want), len(got), strings.Join(lines, "; "))}
	}
	var out []string
	for i, w := range want {
		g := got[i]
		if g.Type != w.Type {
			out = append(out, fmt.Sprintf("errors[%d].type: expected %s, got %s (%s)", i, w.Type, g.Type, g.Message))
		}
		if w.MessageContains != "" && !strings.Contains(g.Message, w.MessageContains) {
			out = append(out, fmt.Sprintf("errors[%d].message: expected it to contain %q, got %q", i, w.MessageContains, g.Message))
		}
	}
	return out
}

// absent reports each of names (backend.<key>) that is there in byName.
func absent[T any](key, noun string, names []string, byName map[string][]T) []string {
	var out []string
	for _, name := range names {
		if n := len(byName[name]); n > 0 {
			out = append(out, fmt.Sprintf("backend.%s: %s %q exists (%d)", key, noun, name, n))
		}
	}
	return out
}

func checkBackend(b *ExpectBackend, be *backendState) []string {
	var out []string
	byName := map[string][]upgrade.Experiment{}
	for _, e := range be.experiments {
		byName[e.Name] = append(byName[e.Name], e)
	}
	if b.ExperimentCount != nil && len(be.experiments) != *b.ExperimentCount {
		names := make([]string, len(be.experiments))
		for i, e := range be.experiments {
			names[i] = e.Name
		}
		sort.Strings(names)
		out = append(out, fmt.Sprintf("backend.experiment_count: expected %d, got %d [%s]", *b.ExperimentCount, len(be.experiments), strings.Join(names, ", ")))
	}
	out = append(out, absent("experiment_absent", "experiment", b.ExperimentAbsent, byName)...)
	for i, want := range b.Experiments {
		name := want["name"].(string)
		p := fmt.Sprintf("backend.experiments[%d] (%s)", i, name)
		list := byName[name]
		switch len(list) {
		case 0:
			out = append(out, fmt.Sprintf("%s: no experiment with that name on the backend", p))
			continue
		case 1:
		default:
			out = append(out, fmt.Sprintf("%s: %d experiments have that name", p, len(list)))
			continue
		}
		out = append(out, subset(p, want, experimentView(&list[0]))...)
	}
	out = append(out, checkFlags(b, be.flags)...)
	out = append(out, checkResults(b, be)...)
	out = append(out, checkEnrolled(b.Enrolled, byName, be.enrollment)...)
	out = append(out, checkQueryAbsent(b.QueryAbsent, byName)...)
	if len(b.Users) > 0 && be.user == nil {
		out = append(out, "backend.users: only the embedded simulator can list users (backend: sim)")
		return out
	}
	for i, want := range b.Users {
		id := want["id"].(string)
		p := fmt.Sprintf("backend.users[%d] (%s)", i, id)
		u, ok := be.user(id)
		if !ok {
			out = append(out, fmt.Sprintf("%s: the user was never initialised", p))
			continue
		}
		out = append(out, subset(p, want, jsonValue(map[string]any{"id": u.ID, "group": u.Group, "working_group": u.WorkingGroup}))...)
	}
	return out
}

// experimentView is an experiment in the snake_case vocabulary of setup and
// create_experiment, as a JSON-like value for subset matching.
func experimentView(e *upgrade.Experiment) any {
	type cond struct {
		Code   string  `json:"code"`
		Weight float64 `json:"weight"`
	}
	type dp struct {
		Site             string `json:"site"`
		Target           string `json:"target"`
		ExcludeIfReached bool   `json:"exclude_if_reached"`
	}
	type group struct {
		Type    string `json:"type"`
		GroupID string `json:"group_id"`
	}
	type post struct {
		Rule          string `json:"rule"`
		ConditionCode string `json:"condition_code,omitempty"`
	}
	groups := func(gs []upgrade.GroupRef) []group {
		out := []group{}
		for _, g := range gs {
			out = append(out, group{g.Type, g.GroupID})
		}
		return out
	}
	conds := []cond{}
	cs := slices.Clone(e.Conditions)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Order < cs[j].Order })
	for _, c := range cs {
		conds = append(conds, cond{c.ConditionCode, c.AssignmentWeight})
	}
	dps := []dp{}
	ps := slices.Clone(e.Partitions)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Order < ps[j].Order })
	for _, p := range ps {
		dps = append(dps, dp{p.Site, p.Target, p.ExcludeIfReached})
	}
	pr := post{Rule: e.PostExperimentRule}
	if e.RevertTo != nil {
		if c := e.ConditionByID(*e.RevertTo); c != nil {
			pr.ConditionCode = c.ConditionCode
		}
	}
	tags := e.Tags
	if tags == nil {
		tags = []string{}
	}
	v := map[string]any{
		"id": e.ID, "name": e.Name, "description": e.Description, "context": e.ContextName(), "status": string(e.State),
		"tags": tags, "conditions": conds, "decision_points": dps, "assignment_unit": e.AssignmentUnit,
		"group_type": e.Group, "consistency_rule": e.ConsistencyRule, "post_experiment_rule": pr,
		"filter_mode": e.FilterMode, "inclusion_users": nonNil(e.Inclusion.Users), "inclusion_groups": groups(e.Inclusion.Groups),
		"exclusion_users": nonNil(e.Exclusion.Users), "exclusion_groups": groups(e.Exclusion.Groups),
	}
	return jsonValue(v)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// jsonValue turns any Go value into its JSON-decoded form (maps, slices,
// float64), the form subset compares.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(cannot encode: %v)", err)
	}
	return rawValue(b)
}

func rawValue(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

// subset reports where got does not contain want: every key of a wanted
// mapping must be present with a matching value, lists must have the same
// length and match item by item, scalars must be equal. A wanted null
// matches an absent key.
func subset(path string, want, got any) []string {
	var out []string
	subsetInto(path, want, got, &out)
	return out
}

func subsetInto(path string, want, got any, out *[]string) {
	mismatch := func() {
		*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", path, shortJSON(want), shortJSON(got)))
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			mismatch()
			return
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, present := g[k]
			if !present {
				if w[k] != nil {
					*out = append(*out, fmt.Sprintf("%s.%s: missing (expected %s)", path, k, shortJSON(w[k])))
				}
				continue
			}
			subsetInto(path+"."+k, w[k], gv, out)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			mismatch()
			return
		}
		for i := range w {
			subsetInto(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], out)
		}
	default:
		if want != got {
			mismatch()
		}
	}
}

func shortJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := string(b)
	if len(s) > 240 {
		s = s[:240] + "..."
	}
	return s
}

// enrolledYAML is an entry of expect.backend.enrolled: the users enrolled
// in an experiment, in all and per condition code.
type enrolledYAML struct {
	Experiment yaml.Node `yaml:"experiment"`
	Users      yaml.Node `yaml:"users"`
	Conditions yaml.Node `yaml:"conditions"`
}

// ExpectEnrolled is the enrollment expected of one experiment, read from
// the backend's enrollment statistics; nil Users and absent condition
// codes are not checked.
type ExpectEnrolled struct {
	Experiment string
	Users      *int
	Conditions map[string]int
}

// enrolled converts expect.backend.enrolled (what names the mapping that
// holds it, at gives the position of entry j).
func (d *decoder) enrolled(xs []enrolledYAML, what string, at func(j int) *yaml.Node) []ExpectEnrolled {
	var out []ExpectEnrolled
	for j := range xs {
		x, w := &xs[j], fmt.Sprintf("%s.enrolled[%d]", what, j)
		var e ExpectEnrolled
		set(d, &e.Experiment, &x.Experiment, w+".experiment", d.str)
		set(d, &e.Users, &x.Users, w+".users", ptr(d.nonNegative))
		set(d, &e.Conditions, &x.Conditions, w+".conditions", d.countsByCode)
		switch {
		case d.err != nil:
			return out
		case e.Experiment == "":
			d.fail(at(j), "%s: experiment is required (an experiment's name)", w)
		case e.Users == nil && len(e.Conditions) == 0:
			d.fail(at(j), "%s: give users or conditions (the counts to check)", w)
		}
		out = append(out, e)
	}
	return out
}

// countsByCode converts a mapping of condition codes to user counts.
func (d *decoder) countsByCode(n *yaml.Node, what string) (map[string]int, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errf(n, "%s: want a mapping of condition codes to counts, got %s", what, kindName(n))
	}
	out := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		code, err := d.str(n.Content[i], what+" key")
		if err != nil {
			return nil, err
		}
		v, err := d.nonNegative(resolve(n.Content[i+1]), what+"."+code)
		if err != nil {
			return nil, err
		}
		out[code] = v
	}
	return out, nil
}

// checkEnrolled compares backend.enrolled with the enrollment statistics
// of the experiments with those names.
func checkEnrolled(want []ExpectEnrolled, byName map[string][]upgrade.Experiment, read func(id string) (*upgrade.EnrollmentStats, error)) []string {
	var out []string
	for i, w := range want {
		p := fmt.Sprintf("backend.enrolled[%d] (%s)", i, w.Experiment)
		list := byName[w.Experiment]
		if len(list) != 1 {
			out = append(out, fmt.Sprintf("%s: %d experiments have that name", p, len(list)))
			continue
		}
		if read == nil {
			out = append(out, p+": this backend's enrollment cannot be read")
			continue
		}
		st, err := read(list[0].ID)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: cannot read the enrollment: %v", p, err))
			continue
		}
		if w.Users != nil && st.Users != *w.Users {
			out = append(out, fmt.Sprintf("%s.users: expected %d, got %d", p, *w.Users, st.Users))
		}
		byID := map[string]int{}
		for _, c := range st.Conditions {
			byID[c.ID] = c.Users
		}
		codes := make([]string, 0, len(w.Conditions))
		for code := range w.Conditions {
			codes = append(codes, code)
		}
		sort.Strings(codes)
		for _, code := range codes {
			id := ""
			for _, c := range list[0].Conditions {
				if c.ConditionCode == code {
					id = c.ID
				}
			}
			if id == "" {
				out = append(out, fmt.Sprintf("%s.conditions.%s: the experiment has no condition with that code", p, code))
				continue
			}
			if got := byID[id]; got != w.Conditions[code] {
				out = append(out, fmt.Sprintf("%s.conditions.%s: expected %d, got %d", p, code, w.Conditions[code], got))
			}
		}
	}
	return out
}

// queryAbsent checks that each entry of query_absent names its
// experiment and nothing but the experiment and the query's name.
func (d *decoder) queryAbsent(qs []map[string]any, what string, at func(j int) *yaml.Node) []map[string]any {
	for j, q := range qs {
		if s, _ := q["experiment"].(string); d.err == nil && (s == "" || len(q) != 2) {
			d.fail(at(j), "%s.query_absent[%d]: give experiment and name only", what, j)
		}
	}
	return qs
}

// checkQueryAbsent reports each query of query_absent that its experiment
// still has.
func checkQueryAbsent(absent []map[string]any, byName map[string][]upgrade.Experiment) []string {
	var out []string
	for i, q := range absent {
		exp, name := q["experiment"].(string), q["name"].(string)
		for _, e := range byName[exp] {
			qs, _ := e.QueryList()
			for _, have := range qs {
				if have.Name == name {
					out = append(out, fmt.Sprintf("backend.query_absent[%d]: %s still has the query %s", i, exp, name))
				}
			}
		}
	}
	return out
}
