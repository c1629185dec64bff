package scenario

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/lazy"
	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/internal/textdist"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The scenario file as written (spec/scenarios.md). Every mapping of the
// format is a struct: yaml.v3 decodes into them with KnownFields, so their
// yaml tags are the one list of known keys (the "did you mean" hints and
// the "known:" lists of messages read them too). Every value is a
// yaml.Node: it keeps its line and column for messages, tells `key: null`
// from a key not written (Kind 0), and is converted to the Scenario's Go
// types below, by converters that say what they want ("want a whole
// number, got "ten"").

type fileYAML struct {
	Name        yaml.Node    `yaml:"name"`
	Description yaml.Node    `yaml:"description"`
	Backend     yaml.Node    `yaml:"backend"`
	Seed        yaml.Node    `yaml:"seed"`
	LLM         yaml.Node    `yaml:"llm"`
	Golden      yaml.Node    `yaml:"golden"`
	Options     *optionsYAML `yaml:"options"`
	Setup       *setupYAML   `yaml:"setup"`
	Steps       []stepYAML   `yaml:"steps"`
}

type optionsYAML struct {
	Confirm                   yaml.Node `yaml:"confirm"`
	Yes                       yaml.Node `yaml:"yes"`
	WaitJobs                  yaml.Node `yaml:"wait_jobs"`
	OutputSchema              yaml.Node `yaml:"output_schema"`
	ConversationalOutputs     yaml.Node `yaml:"conversational_outputs"`
	MaxAutoReplies            yaml.Node `yaml:"max_auto_replies"`
	MaxConsecutiveAutoReplies yaml.Node `yaml:"max_consecutive_auto_replies"`
	TerminationWords          yaml.Node `yaml:"termination_words"`
	ReplyWording              yaml.Node `yaml:"reply_wording"`
}

type setupYAML struct {
	AuthRequired yaml.Node        `yaml:"auth_required"`
	Experiments  []experimentYAML `yaml:"experiments"`
	Users        []userYAML       `yaml:"users"`
	Segments     []segmentYAML    `yaml:"segments"` // flags.go
	Flags        []flagYAML       `yaml:"flags"`
	Metrics      []metricYAML     `yaml:"metrics"` // setup_metrics.go
	Queries      []querySetupYAML `yaml:"queries"`
	Students     []studentsYAML   `yaml:"students"`
}

// experimentYAML is an experiment of setup and of expect.backend: the
// params of create_experiment plus status.
type experimentYAML struct {
	Name               yaml.Node `yaml:"name"`
	Context            yaml.Node `yaml:"context"`
	Status             yaml.Node `yaml:"status"`
	Description        yaml.Node `yaml:"description"`
	Tags               yaml.Node `yaml:"tags"`
	Conditions         yaml.Node `yaml:"conditions"`
	DecisionPoints     yaml.Node `yaml:"decision_points"`
	AssignmentUnit     yaml.Node `yaml:"assignment_unit"`
	GroupType          yaml.Node `yaml:"group_type"`
	ConsistencyRule    yaml.Node `yaml:"consistency_rule"`
	PostExperimentRule yaml.Node `yaml:"post_experiment_rule"`
	FilterMode         yaml.Node `yaml:"filter_mode"`
	InclusionUsers     yaml.Node `yaml:"inclusion_users"`
	InclusionGroups    yaml.Node `yaml:"inclusion_groups"`
	ExclusionUsers     yaml.Node `yaml:"exclusion_users"`
	ExclusionGroups    yaml.Node `yaml:"exclusion_groups"`
}

// userYAML is a user of setup and of expect.backend.
type userYAML struct {
	ID           yaml.Node `yaml:"id"`
	Group        yaml.Node `yaml:"group"`
	WorkingGroup yaml.Node `yaml:"working_group"`
}

type stepYAML struct {
	Say    yaml.Node   `yaml:"say"`
	Answer yaml.Node   `yaml:"answer"`
	Resume *resumeYAML `yaml:"resume"`
	LLM    yaml.Node   `yaml:"llm"` // llmtest.Reply reads each reply
	Expect *expectYAML `yaml:"expect"`
}

type resumeYAML struct {
	Wait    yaml.Node `yaml:"wait"`
	Timeout yaml.Node `yaml:"timeout"`
}

type expectYAML struct {
	Status            yaml.Node           `yaml:"status"`
	ExitCode          yaml.Node           `yaml:"exit_code"`
	Trace             yaml.Node           `yaml:"trace"`
	LLMCalls          yaml.Node           `yaml:"llm_calls"`
	ResponseContains  yaml.Node           `yaml:"response_contains"`
	ResponseMatches   yaml.Node           `yaml:"response_matches"`
	Confirmation      *confirmationYAML   `yaml:"confirmation"`
	Actions           *[]expectActionYAML `yaml:"actions"`
	Errors            *[]expectErrorYAML  `yaml:"errors"`
	Output            yaml.Node           `yaml:"output"`
	Job               *jobYAML            `yaml:"job"`
	Backend           *backendYAML        `yaml:"backend"`
	TerminationReason yaml.Node           `yaml:"termination_reason"`
}

type confirmationYAML struct {
	Action          yaml.Node `yaml:"action"`
	Destructive     yaml.Node `yaml:"destructive"`
	MessageContains yaml.Node `yaml:"message_contains"`
}

type expectActionYAML struct {
	Action        yaml.Node `yaml:"action"`
	Status        yaml.Node `yaml:"status"`
	ParamsSubset  yaml.Node `yaml:"params_subset"`
	ResultSubset  yaml.Node `yaml:"result_subset"`
	ErrorContains yaml.Node `yaml:"error_contains"`
}

type expectErrorYAML struct {
	Type            yaml.Node `yaml:"type"`
	MessageContains yaml.Node `yaml:"message_contains"`
}

type jobYAML struct {
	State yaml.Node `yaml:"state"`
	Done  yaml.Node `yaml:"done"`
	Total yaml.Node `yaml:"total"`
}

type backendYAML struct {
	Experiments      []experimentYAML    `yaml:"experiments"`
	ExperimentAbsent yaml.Node           `yaml:"experiment_absent"`
	ExperimentCount  yaml.Node           `yaml:"experiment_count"`
	Users            []userYAML          `yaml:"users"`
	Flags            []flagExpectYAML    `yaml:"flags"` // flags.go
	FlagAbsent       yaml.Node           `yaml:"flag_absent"`
	Segments         []segmentExpectYAML `yaml:"segments"`
	SegmentAbsent    yaml.Node           `yaml:"segment_absent"`
	Metrics          []metricExpectYAML  `yaml:"metrics"` // setup_metrics.go
	MetricAbsent     yaml.Node           `yaml:"metric_absent"`
	Queries          []queryExpectYAML   `yaml:"queries"`
	Enrolled         []enrolledYAML      `yaml:"enrolled"` // expect.go
	QueryAbsent      []queryExpectYAML   `yaml:"query_absent"`
}

// yamlTypes are the structs above by the name yaml.v3 gives them in its
// errors ("scenario.expectYAML"), for the known keys of a message.
var yamlTypes = &lazy.Value[map[string]reflect.Type]{New: buildYAMLTypes}

func buildYAMLTypes() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, v := range []any{fileYAML{}, optionsYAML{}, setupYAML{}, experimentYAML{}, userYAML{}, stepYAML{},
		resumeYAML{}, expectYAML{}, confirmationYAML{}, expectActionYAML{}, expectErrorYAML{}, jobYAML{}, backendYAML{},
		segmentYAML{}, flagYAML{}, flagExpectYAML{}, segmentExpectYAML{}, metricYAML{}, querySetupYAML{}, studentsYAML{},
		metricExpectYAML{}, queryExpectYAML{}, caseYAML{}, turnYAML{}, caseExpectYAML{}, budgetYAML{}, enrolledYAML{}} {
		t := reflect.TypeOf(v)
		m[t.String()] = t
	}
	return m
}

// nulls refuses `key:` with no value (or null) where a mapping or a list
// belongs, which the decoder would take for a key not written at all.
// `- resume:` is the exception: a resume without options.
func (d *decoder) nulls(n *yaml.Node, v reflect.Value, path []any) error {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return d.nulls(n, v.Elem(), path)
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for i := 0; i < v.Len() && i < len(n.Content); i++ {
				if err := d.nulls(resolve(n.Content[i]), v.Index(i), append(slices.Clip(path), any(i))); err != nil {
					return err
				}
			}
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[yaml.Node]() {
			return nil
		}
		for i, key := range yamlKeys(v.Type()) {
			c := child(n, key)
			if c == nil || key == "resume" {
				continue
			}
			p := append(slices.Clip(path), any(key))
			if isNull(c) && v.Field(i).Type() != reflect.TypeFor[yaml.Node]() {
				want, ft := "a mapping (key: value)", v.Field(i).Type()
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Slice {
					want = wantList(ft.String())
				}
				return d.errf(c, "%s: want %s, got nothing (null)", label(p), want)
			}
			if err := d.nulls(c, v.Field(i), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// wantList says which list a slice type of decode.go ("[]scenario.stepYAML")
// holds, for messages.
func wantList(goType string) string {
	switch goType {
	case reflect.TypeFor[[]stepYAML]().String():
		return "a list of steps (- say: ...)"
	case reflect.TypeFor[[]expectActionYAML]().String(), reflect.TypeFor[[]expectErrorYAML]().String():
		return "a list ([] for none)"
	}
	return "a list"
}

// yamlKeys are the keys of a struct of decode.go: its yaml tags in field
// order (every field has one).
func yamlKeys(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i], _, _ = strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
	}
	return keys
}

// actionStates are the values of expect.actions[].status; the other
// enumerations a scenario may name (turn statuses, job states, error
// types) are read from the packages that own them where they are checked.
func actionStates() []string { return []string{"success", "error", "cancelled"} }

var nameRE = lazyre.Of(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// set converts the value n into *dst with conv when the file writes it;
// the first error is kept in d.err and ends the conversion.
func set[T any](d *decoder, dst *T, n *yaml.Node, what string, conv func(*yaml.Node, string) (T, error)) {
	if d.err != nil || n.Kind == 0 {
		return
	}
	v, err := conv(resolve(n), what)
	if err != nil {
		d.err = err
		return
	}
	*dst = v
}

// ptr makes a converter for an optional field (*T: nil = not checked).
func ptr[T any](conv func(*yaml.Node, string) (T, error)) func(*yaml.Node, string) (*T, error) {
	return func(n *yaml.Node, what string) (*T, error) {
		v, err := conv(n, what)
		return &v, err
	}
}

func (d *decoder) fail(n *yaml.Node, format string, args ...any) {
	if d.err == nil {
		d.err = d.errf(n, format, args...)
	}
}

// scenario converts the decoded file; see Parse.
func (d *decoder) scenario(f *fileYAML) (*Scenario, error) {
	sc := &Scenario{File: d.file, Backend: BackendSim, Seed: 1, LLM: LLMSpec{Mode: LLMScript}, Golden: GoldenByDefault(d.file),
		Options: Options{Confirm: "always", WaitJobs: DefaultWaitJobs}}
	set(d, &sc.Name, &f.Name, "name", d.str)
	if d.err == nil && f.Name.Kind != 0 && !nameRE.Get().MatchString(sc.Name) {
		d.fail(resolve(&f.Name), "name %q: use letters, digits, '.', '_' and '-' (it names golden/<name>.txt)", sc.Name)
	}
	set(d, &sc.Description, &f.Description, "description", d.str)
	set(d, &sc.Backend, &f.Backend, "backend", d.oneOf(BackendSim, BackendURL))
	set(d, &sc.Seed, &f.Seed, "seed", func(n *yaml.Node, what string) (int64, error) {
		v, err := d.integer(n, what)
		return int64(v), err
	})
	set(d, &sc.LLM, &f.LLM, "llm", d.llmSpec)
	set(d, &sc.Golden, &f.Golden, "golden", d.boolean)
	if f.Options != nil {
		d.options(f.Options, &sc.Options)
	}
	if f.Setup != nil {
		d.setup(f.Setup, &sc.Setup)
	}
	for i := range f.Steps {
		if d.err != nil {
			break
		}
		sc.Steps = append(sc.Steps, d.step(&f.Steps[i], i))
	}
	switch {
	case d.err != nil:
		return nil, d.err
	case sc.Name == "":
		return nil, d.errf(d.root, "name is required (it names golden/<name>.txt)")
	case len(sc.Steps) == 0:
		return nil, d.errf(d.root, "steps: at least one step (say, answer or resume) is required")
	case sc.Backend == BackendURL && sc.Setup.AuthRequired:
		return nil, d.errf(d.root, "setup.auth_required only applies to backend: sim")
	}
	return sc, nil
}

func (d *decoder) options(x *optionsYAML, o *Options) {
	set(d, &o.Confirm, &x.Confirm, "options.confirm", d.oneOf("always", "destructive", "never"))
	set(d, &o.Yes, &x.Yes, "options.yes", d.boolean)
	set(d, &o.WaitJobs, &x.WaitJobs, "options.wait_jobs", d.duration)
	set(d, &o.OutputSchema, &x.OutputSchema, "options.output_schema", d.path)
	set(d, &o.ConversationalOutputs, &x.ConversationalOutputs, "options.conversational_outputs", d.boolean)
	set(d, &o.MaxAutoReplies, &x.MaxAutoReplies, "options.max_auto_replies", d.nonNegative)
	set(d, &o.MaxConsecutiveAutoReplies, &x.MaxConsecutiveAutoReplies, "options.max_consecutive_auto_replies", d.nonNegative)
	set(d, &o.TerminationWords, &x.TerminationWords, "options.termination_words", d.strList)
	set(d, &o.ReplyWording, &x.ReplyWording, "options.reply_wording", d.oneOf("go", "llm"))
	if d.err == nil && o.Confirm == "never" && !o.Yes {
		d.fail(d.at("options"), "options.confirm: never needs yes: true (as `ask --confirm never` needs --yes)")
	}
}

func (d *decoder) setup(x *setupYAML, s *Setup) {
	set(d, &s.AuthRequired, &x.AuthRequired, "setup.auth_required", d.boolean)
	setupList(d, &s.Experiments, x.Experiments, "experiments", d.setupExperiment)
	setupList(d, &s.Users, x.Users, "users", d.setupUser)
	setupList(d, &s.Segments, x.Segments, "segments", d.setupSegment)
	setupList(d, &s.Flags, x.Flags, "flags", d.setupFlag)
	d.setupResults(x, s)
}

// setupList converts the entries of setup.<key> with conv, up to the
// first error.
func setupList[X, S any](d *decoder, dst *[]S, xs []X, key string, conv func(x *X, n *yaml.Node, i int) S) {
	for i := range xs {
		if d.err != nil {
			return
		}
		*dst = append(*dst, conv(&xs[i], d.at("setup", key, i), i))
	}
}

// written lists the values a struct of yaml.Node fields (an
// experimentYAML, a userYAML) has from the file, in field order, by key.
func written(v any) (keys []string, values []*yaml.Node) {
	rv := reflect.ValueOf(v).Elem()
	for i, key := range yamlKeys(rv.Type()) {
		if n := rv.Field(i).Addr().Interface().(*yaml.Node); n.Kind != 0 {
			keys, values = append(keys, key), append(values, resolve(n))
		}
	}
	return keys, values
}

// experimentValue is the JSON-like value of one experiment field: a
// post_experiment_rule written as a word is {rule: word}.
func (d *decoder) experimentValue(key string, n *yaml.Node) (any, error) {
	if key == "post_experiment_rule" && n.Kind == yaml.ScalarNode && !isNull(n) {
		return map[string]any{"rule": n.Value}, nil
	}
	return d.value(n, 0)
}

func (d *decoder) setupExperiment(x *experimentYAML, n *yaml.Node, i int) SetupExperiment {
	what := fmt.Sprintf("setup.experiments[%d]", i)
	e := SetupExperiment{Line: n.Line}
	e.Name, e.Params = d.setupParams(x, n, what, "experiment", "name", func(key string, v *yaml.Node) bool {
		if key != "status" {
			return false
		}
		s, err := d.str(v, what+".status")
		if err != nil {
			d.err = err
			return true
		}
		st := upgrade.NormalizeState(s)
		if !st.Valid() {
			d.fail(v, "%s.status: unknown state %q", what, s)
			return true
		}
		e.Status = string(st)
		return true
	})
	return e
}

func (d *decoder) setupUser(x *userYAML, n *yaml.Node, i int) SetupUser {
	what := fmt.Sprintf("setup.users[%d]", i)
	u := SetupUser{Line: n.Line}
	set(d, &u.ID, &x.ID, what+".id", d.str)
	set(d, &u.Group, &x.Group, what+".group", func(n *yaml.Node, what string) (map[string][]string, error) {
		if n.Kind != yaml.MappingNode {
			return nil, d.errf(n, "%s: want {group type: [ids]}, got %s", what, kindName(n))
		}
		m := map[string][]string{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k := resolve(n.Content[j])
			ids, err := d.strList(resolve(n.Content[j+1]), what+"."+k.Value)
			if err != nil {
				return nil, err
			}
			m[k.Value] = ids
		}
		return m, nil
	})
	set(d, &u.WorkingGroup, &x.WorkingGroup, what+".working_group", func(n *yaml.Node, what string) (map[string]string, error) {
		if n.Kind != yaml.MappingNode {
			return nil, d.errf(n, "%s: want {group type: id}, got %s", what, kindName(n))
		}
		m := map[string]string{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k := resolve(n.Content[j])
			id, err := d.str(resolve(n.Content[j+1]), what+"."+k.Value)
			if err != nil {
				return nil, err
			}
			m[k.Value] = id
		}
		return m, nil
	})
	if d.err == nil && u.ID == "" {
		d.fail(n, "%s: id is required", what)
	}
	return u
}

func (d *decoder) step(x *stepYAML, i int) Step {
	what := fmt.Sprintf("step %d", i+1)
	n := d.at("steps", i)
	st := Step{Line: n.Line}
	var kinds []string
	for _, k := range []string{StepSay, StepAnswer, StepResume} {
		if child(n, k) != nil {
			kinds = append(kinds, k)
		}
	}
	switch len(kinds) {
	case 0:
		d.fail(n, "%s: needs one of say, answer or resume", what)
		return st
	case 1:
		st.Kind = kinds[0]
	default:
		d.fail(n, "%s: has %s; a step is exactly one of say, answer or resume", what, strings.Join(kinds, " and "))
		return st
	}
	set(d, &st.Text, &x.Say, what+".say", d.str)
	set(d, &st.Text, &x.Answer, what+".answer", d.str)
	if x.Resume != nil {
		set(d, &st.Resume.Wait, &x.Resume.Wait, what+".resume.wait", d.boolean)
		set(d, &st.Resume.Timeout, &x.Resume.Timeout, what+".resume.timeout", d.duration)
	}
	set(d, &st.LLM, &x.LLM, what, d.replies)
	if x.Expect != nil {
		d.expect(x.Expect, i, what+".expect", &st.Expect)
	}
	return st
}

func (d *decoder) expect(x *expectYAML, step int, what string, e *Expect) {
	w := func(key string) string { return what + "." + key }
	set(d, &e.Status, &x.Status, w("status"), ptr(d.oneOf(pipeline.TurnStatusNames()...)))
	set(d, &e.ExitCode, &x.ExitCode, w("exit_code"), ptr(d.nonNegative))
	set(d, &e.Trace, &x.Trace, w("trace"), ptr(d.strList))
	set(d, &e.LLMCalls, &x.LLMCalls, w("llm_calls"), ptr(d.nonNegative))
	set(d, &e.ResponseContains, &x.ResponseContains, w("response_contains"), d.strList)
	set(d, &e.ResponseMatches, &x.ResponseMatches, w("response_matches"), d.regexps)
	if c := x.Confirmation; c != nil {
		e.Confirmation = &ExpectConfirmation{}
		set(d, &e.Confirmation.Action, &c.Action, w("confirmation.action"), d.str)
		set(d, &e.Confirmation.Destructive, &c.Destructive, w("confirmation.destructive"), ptr(d.boolean))
		set(d, &e.Confirmation.MessageContains, &c.MessageContains, w("confirmation.message_contains"), d.strList)
	}
	if x.Actions != nil {
		list := []ExpectAction{}
		for j, a := range *x.Actions {
			aw := fmt.Sprintf("%s[%d]", w("actions"), j)
			var ea ExpectAction
			set(d, &ea.Action, &a.Action, aw+".action", d.str)
			set(d, &ea.Status, &a.Status, aw+".status", d.oneOf(actionStates()...))
			set(d, &ea.ParamsSubset, &a.ParamsSubset, aw+".params_subset", d.anyValue)
			set(d, &ea.ResultSubset, &a.ResultSubset, aw+".result_subset", d.anyValue)
			set(d, &ea.ErrorContains, &a.ErrorContains, aw+".error_contains", d.str)
			if d.err == nil && ea.Action == "" {
				d.fail(d.at("steps", step, "expect", "actions", j), "%s: action is required", aw)
			}
			list = append(list, ea)
		}
		e.Actions = &list
	}
	if x.Errors != nil {
		list := []ExpectError{}
		for j, xe := range *x.Errors {
			ew := fmt.Sprintf("%s[%d]", w("errors"), j)
			var ee ExpectError
			set(d, &ee.Type, &xe.Type, ew+".type", d.oneOf(actions.ErrTypes()...))
			set(d, &ee.MessageContains, &xe.MessageContains, ew+".message_contains", d.str)
			if d.err == nil && ee.Type == "" {
				d.fail(d.at("steps", step, "expect", "errors", j), "%s: type is required", ew)
			}
			list = append(list, ee)
		}
		e.Errors = &list
	}
	if x.Output.Kind != 0 {
		set(d, &e.Output, &x.Output, w("output"), d.anyValue)
		e.HasOutput = true
	}
	if j := x.Job; j != nil {
		e.Job = &ExpectJob{}
		set(d, &e.Job.State, &j.State, w("job.state"), d.oneOf(actions.JobStates()...))
		set(d, &e.Job.Done, &j.Done, w("job.done"), ptr(d.nonNegative))
		set(d, &e.Job.Total, &j.Total, w("job.total"), ptr(d.nonNegative))
	}
	if b := x.Backend; b != nil {
		e.Backend = &ExpectBackend{}
		bw := w("backend")
		e.Backend.Experiments = backendList(d, b.Experiments, step, bw, "experiments", "name")
		set(d, &e.Backend.ExperimentAbsent, &b.ExperimentAbsent, bw+".experiment_absent", d.strList)
		set(d, &e.Backend.ExperimentCount, &b.ExperimentCount, bw+".experiment_count", ptr(d.nonNegative))
		e.Backend.Users = backendList(d, b.Users, step, bw, "users", "id")
		e.Backend.Flags = backendList(d, b.Flags, step, bw, "flags", "key")
		set(d, &e.Backend.FlagAbsent, &b.FlagAbsent, bw+".flag_absent", d.strList)
		e.Backend.Segments = backendList(d, b.Segments, step, bw, "segments", "name")
		set(d, &e.Backend.SegmentAbsent, &b.SegmentAbsent, bw+".segment_absent", d.strList)
		d.expectResults(b, e.Backend, step, bw)
		e.Backend.QueryAbsent = d.queryAbsent(backendList(d, b.QueryAbsent, step, bw, "query_absent", "name"), bw, func(j int) *yaml.Node { return d.at("steps", step, "expect", "backend", "query_absent", j) })
		e.Backend.Enrolled = d.enrolled(b.Enrolled, bw, func(j int) *yaml.Node { return d.at("steps", step, "expect", "backend", "enrolled", j) })
	}
	set(d, &e.TerminationReason, &x.TerminationReason, w("termination_reason"), ptr(d.str))
}

// backendList converts the entries of expect.backend.<key> with subset.
func backendList[X any](d *decoder, xs []X, step int, bw, key, idKey string) []map[string]any {
	var out []map[string]any
	for j := range xs {
		out = append(out, d.subset(&xs[j], d.at("steps", step, "expect", "backend", key, j), fmt.Sprintf("%s.%s[%d]", bw, key, j), idKey))
	}
	return out
}

// subset converts an expected experiment or user (an experimentYAML or a
// userYAML) to the map its backend counterpart is matched against; idKey
// (name, id) is required.
func (d *decoder) subset(x any, n *yaml.Node, what, idKey string) map[string]any {
	m := map[string]any{}
	keys, values := written(x)
	for j, key := range keys {
		if d.err != nil {
			return m
		}
		val, err := d.experimentValue(key, values[j])
		if err != nil {
			d.err = err
			return m
		}
		if key == "status" && idKey != "key" { // a flag's status is not an experiment state
			s, ok := val.(string)
			if !ok || !upgrade.NormalizeState(s).Valid() {
				d.fail(values[j], "%s.status: unknown state %s", what, kindName(values[j]))
				return m
			}
			val = string(upgrade.NormalizeState(s))
		}
		m[key] = val
	}
	if id, ok := m[idKey].(string); d.err == nil && (!ok || id == "") {
		d.fail(n, "%s: %s is required", what, idKey)
	}
	return m
}

// oneOf makes a converter for an enumeration.
func (d *decoder) oneOf(allowed ...string) func(*yaml.Node, string) (string, error) {
	return func(n *yaml.Node, what string) (string, error) { return d.enum(n, what, allowed...) }
}

func (d *decoder) anyValue(n *yaml.Node, _ string) (any, error) { return d.value(n, 0) }

// path is a path of the scenario (output_schema): text that stays inside
// the scenario's folder.
func (d *decoder) path(n *yaml.Node, what string) (string, error) {
	s, err := d.str(n, what)
	if err == nil {
		err = d.insideFolder(n, what, s)
	}
	return s, err
}

// regexps are response_matches: each a valid regular expression once its
// {{templates}} are filled.
func (d *decoder) regexps(n *yaml.Node, what string) ([]string, error) {
	list, err := d.strList(n, what)
	if err != nil {
		return nil, err
	}
	for _, re := range list {
		if _, err := regexp.Compile(templateRE.Get().ReplaceAllString(re, "x")); err != nil {
			return nil, d.errf(n, "%s: %q is not a valid regular expression: %v", what, re, err)
		}
	}
	return list, nil
}

func (d *decoder) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return "", d.errf(n, "%s: want text, got %s", what, kindName(n))
	}
	return n.Value, nil
}

func (d *decoder) enum(n *yaml.Node, what string, allowed ...string) (string, error) {
	s, err := d.str(n, what)
	if err != nil {
		return "", err
	}
	if !slices.Contains(allowed, s) {
		hint := ""
		if c := textdist.Closest(s, allowed, 3); c != "" {
			hint = fmt.Sprintf("; did you mean %q?", c)
		}
		return "", d.errf(n, "%s: %q is not one of %s%s", what, s, strings.Join(allowed, ", "), hint)
	}
	return s, nil
}

func (d *decoder) boolean(n *yaml.Node, what string) (bool, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, nil
		}
	}
	return false, d.errf(n, "%s: want true or false, got %s", what, kindName(n))
}

func (d *decoder) integer(n *yaml.Node, what string) (int, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		var v int64
		if err := n.Decode(&v); err == nil && v >= math.MinInt32 && v <= math.MaxInt32 {
			return int(v), nil
		}
	}
	return 0, d.errf(n, "%s: want a whole number, got %s", what, kindName(n))
}

func (d *decoder) nonNegative(n *yaml.Node, what string) (int, error) {
	v, err := d.integer(n, what)
	if err == nil && v < 0 {
		err = d.errf(n, "%s: want 0 or more, got %d", what, v)
	}
	return v, err
}

func (d *decoder) duration(n *yaml.Node, what string) (time.Duration, error) {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		if n.Value == "0" {
			return 0, nil
		}
		if v, err := time.ParseDuration(n.Value); err == nil && v >= 0 {
			return v, nil
		}
	}
	return 0, d.errf(n, "%s: want a duration such as 0s, 500ms or 2m, got %s", what, kindName(n))
}

// strList accepts a list of strings or a single string.
func (d *decoder) strList(n *yaml.Node, what string) ([]string, error) {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return []string{n.Value}, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, "%s: want a list of text, got %s", what, kindName(n))
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		s, err := d.str(item, what)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// value converts a node to a JSON-like value: map[string]any, []any,
// string, float64, bool or nil.
func (d *decoder) value(n *yaml.Node, depth int) (any, error) {
	n = resolve(n)
	if depth > 64 {
		return nil, d.errf(n, "value nests too deeply")
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return nil, d.errf(k, "keys must be plain words (merge keys are not supported)")
			}
			if _, dup := m[k.Value]; dup {
				return nil, d.errf(k, "key %q appears twice", k.Value)
			}
			v, err := d.value(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := d.value(item, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, d.errf(n, "value %q: %v", n.Value, err)
			}
			return b, nil
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, d.errf(n, "value %q: %v", n.Value, err)
			}
			return f, nil
		}
		return n.Value, nil
	}
	return nil, d.errf(n, "unsupported YAML value")
}

func (d *decoder) llmSpec(n *yaml.Node, _ string) (LLMSpec, error) {
	s, err := d.str(n, "llm")
	if err != nil {
		return LLMSpec{}, err
	}
	mode, file, hasFile := strings.Cut(s, ":")
	switch mode {
	case LLMScript, LLMLive:
		if !hasFile {
			return LLMSpec{Mode: mode}, nil
		}
	case LLMReplay, LLMRecord:
		if hasFile && strings.TrimSpace(file) != "" {
			spec := LLMSpec{Mode: mode, File: strings.TrimSpace(file)}
			return spec, d.insideFolder(n, "llm: "+mode, spec.File)
		}
		return LLMSpec{}, d.errf(n, "llm: %s needs a cassette file (%s:FILE, relative to the scenario file)", mode, mode)
	}
	return LLMSpec{}, d.errf(n, "llm: %q: want script, live, replay:FILE or record:FILE", s)
}

func (d *decoder) replies(n *yaml.Node, what string) ([]llmtest.Reply, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, "%s.llm: want a list of scripted replies, got %s", what, kindName(n))
	}
	out := make([]llmtest.Reply, 0, len(n.Content))
	for _, item := range n.Content {
		var r llmtest.Reply
		if err := r.UnmarshalYAML(resolve(item)); err != nil {
			var se *llmtest.ScriptError
			if errors.As(err, &se) {
				return nil, &ParseError{File: d.file, Line: se.Line, Msg: what + ".llm: " + se.Msg}
			}
			return nil, d.errf(item, "%s.llm: %v", what, err)
		}
		r.Source = fmt.Sprintf("%s:%d", filepath.Base(d.file), item.Line)
		out = append(out, r)
	}
	return out, nil
}
