package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// ParseError is a mistake in a scenario file, with its position.
type ParseError struct {
	File string
	Line int // 0 when unknown
	Col  int // 0 when unknown
	Msg  string
}

func (e *ParseError) Error() string { return safeyaml.At(e.File, e.Line, e.Col, e.Msg) }

// ErrInvalid marks every error of Parse and Load (errors.Is), so callers
// can tell an invalid file (exit 2) from a failed run.
var ErrInvalid = errors.New("invalid scenario")

func (e *ParseError) Unwrap() []error { return []error{ErrInvalid, pipeline.ErrBadInput} }

// limits bound every scenario file: the defaults of internal/safeyaml
// (1 MiB, 262,144 values once aliases are expanded, aliases nested at most
// 10 deep; the largest bundled scenario is 6 KiB). Parsing takes no
// context: within these bounds it ends within about a second.
var limits = safeyaml.Limits{}

// ParseOptions loosen what Parse accepts. The zero value is the strict
// default of spec/scenarios.md.
type ParseOptions struct {
	// AllowOutsidePaths accepts cassette and output-schema paths that are
	// absolute or lead out of the scenario's folder (`scenario run|check
	// --allow-outside-paths`). Without it they are errors naming file:line.
	AllowOutsidePaths bool
}

// Load reads and parses one scenario file with the default options.
func Load(path string) (*Scenario, error) { return ParseOptions{}.Load(path) }

// Parse decodes a scenario with the default options; see ParseOptions.Parse.
func Parse(data []byte, path string) (*Scenario, error) { return ParseOptions{}.Parse(data, path) }

// Load reads and parses one scenario file, which must be a regular file of
// at most 1 MiB.
func (o ParseOptions) Load(path string) (*Scenario, error) {
	data, err := safeyaml.ReadFile(path, limits)
	if err != nil {
		return nil, &ParseError{File: path, Msg: fmt.Sprintf("cannot read: %v", errors.Unwrap(err))}
	}
	return o.Parse(data, path)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// Parse decodes a scenario strictly: unknown keys, wrong types, a step
// without (or with two of) say/answer/resume, a document past the limits
// (an alias bomb), a path that leaves the scenario's folder are errors
// naming path:line:col. path is used in messages, to resolve relative paths and
// to choose the golden default (GoldenByDefault).
func (o ParseOptions) Parse(data []byte, path string) (*Scenario, error) {
	d := &decoder{file: path, dir: filepath.Dir(path), opts: o}
	doc, err := safeyaml.Decode(data, path, limits)
	if err != nil {
		var le *safeyaml.Error
		if errors.As(err, &le) {
			return nil, &ParseError{File: path, Line: le.Line, Col: le.Col, Msg: le.Msg}
		}
		return nil, yamlError(path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &ParseError{File: path, Msg: "empty file: a scenario needs at least name and steps"}
	}
	root := resolve(doc.Content[0])
	sc := &Scenario{File: path, Backend: BackendSim, Seed: 1, LLM: LLMSpec{Mode: LLMScript}, Golden: GoldenByDefault(path),
		Options: Options{Confirm: "always", WaitJobs: DefaultWaitJobs}}
	var hasSteps bool
	err = d.mapping(root, "the scenario", []string{"name", "description", "backend", "seed", "llm", "golden", "options", "setup", "steps"},
		func(key string, k, v *yaml.Node) error {
			var err error
			switch key {
			case "name":
				sc.Name, err = d.str(v, "name")
				if err == nil && !nameRE.MatchString(sc.Name) {
					err = d.errf(v, "name %q: use letters, digits, '.', '_' and '-' (it names golden/<name>.txt)", sc.Name)
				}
			case "description":
				sc.Description, err = d.str(v, "description")
			case "backend":
				sc.Backend, err = d.enum(v, "backend", BackendSim, BackendURL)
			case "seed":
				var n int
				n, err = d.integer(v, "seed")
				sc.Seed = int64(n)
			case "llm":
				sc.LLM, err = d.llmSpec(v)
			case "golden":
				sc.Golden, err = d.boolean(v, "golden")
			case "options":
				err = d.options(v, &sc.Options)
			case "setup":
				err = d.setup(v, &sc.Setup)
			case "steps":
				hasSteps = true
				sc.Steps, err = d.steps(v)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	if sc.Name == "" {
		return nil, d.errf(root, "name is required (it names golden/<name>.txt)")
	}
	if !hasSteps || len(sc.Steps) == 0 {
		return nil, d.errf(root, "steps: at least one step (say, answer or resume) is required")
	}
	if sc.Backend == BackendURL && sc.Setup.AuthRequired {
		return nil, d.errf(root, "setup.auth_required only applies to backend: sim")
	}
	return sc, nil
}

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: ...") into a
// ParseError with the line in its place.
func yamlError(path string, err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &ParseError{File: path, Line: n, Msg: msg[len(m[0]):]}
	}
	return &ParseError{File: path, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

type decoder struct {
	file string
	dir  string // the scenario's folder: relative paths start there and must stay inside
	opts ParseOptions
}

func (d *decoder) errf(n *yaml.Node, format string, args ...any) error {
	return &ParseError{File: d.file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)}
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported value"
}

// mapping walks a mapping node, rejecting unknown and repeated keys.
func (d *decoder) mapping(n *yaml.Node, what string, known []string, fn func(key string, k, v *yaml.Node) error) error {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return d.errf(n, "%s: want a mapping (key: value), got %s", what, kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return d.errf(k, "%s: keys must be plain words", what)
		}
		if k.Value == "<<" {
			return d.errf(k, "%s: YAML merge keys (<<) are not supported", what)
		}
		if !slices.Contains(known, k.Value) {
			hint := ""
			if s := closest(k.Value, known); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", s)
			}
			return d.errf(k, "unknown key %q in %s%s (known: %s)", k.Value, what, hint, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return d.errf(k, "key %q appears twice in %s", k.Value, what)
		}
		seen[k.Value] = true
		if err := fn(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// closest suggests the known key nearest to a typo.
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if dist := editDistance(s, k); dist < bestD {
			best, bestD = k, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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
		return "", d.errf(n, "%s: %q is not one of %s", what, s, strings.Join(allowed, ", "))
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

func (d *decoder) llmSpec(n *yaml.Node) (LLMSpec, error) {
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

func (d *decoder) options(n *yaml.Node, o *Options) error {
	err := d.mapping(n, "options", []string{"confirm", "yes", "wait_jobs", "output_schema", "conversational_outputs",
		"max_auto_replies", "max_consecutive_auto_replies", "termination_words", "reply_wording"},
		func(key string, _, v *yaml.Node) error {
			var err error
			switch key {
			case "confirm":
				o.Confirm, err = d.enum(v, "options.confirm", "always", "destructive", "never")
			case "yes":
				o.Yes, err = d.boolean(v, "options.yes")
			case "wait_jobs":
				o.WaitJobs, err = d.duration(v, "options.wait_jobs")
			case "output_schema":
				o.OutputSchema, err = d.str(v, "options.output_schema")
				if err == nil {
					err = d.insideFolder(v, "options.output_schema", o.OutputSchema)
				}
			case "conversational_outputs":
				o.ConversationalOutputs, err = d.boolean(v, "options.conversational_outputs")
			case "max_auto_replies":
				o.MaxAutoReplies, err = d.nonNegative(v, "options.max_auto_replies")
			case "max_consecutive_auto_replies":
				o.MaxConsecutiveAutoReplies, err = d.nonNegative(v, "options.max_consecutive_auto_replies")
			case "termination_words":
				o.TerminationWords, err = d.strList(v, "options.termination_words")
			case "reply_wording":
				o.ReplyWording, err = d.enum(v, "options.reply_wording", "go", "llm")
			}
			return err
		})
	if err != nil {
		return err
	}
	if o.Confirm == "never" && !o.Yes {
		return d.errf(n, "options.confirm: never needs yes: true (as `ask --confirm never` needs --yes)")
	}
	return nil
}

// setupExperimentKeys are the create_experiment params plus status.
var setupExperimentKeys = []string{"name", "context", "status", "description", "tags", "conditions", "decision_points",
	"assignment_unit", "group_type", "consistency_rule", "post_experiment_rule", "filter_mode",
	"inclusion_users", "inclusion_groups", "exclusion_users", "exclusion_groups"}

func (d *decoder) setup(n *yaml.Node, s *Setup) error {
	return d.mapping(n, "setup", []string{"auth_required", "experiments", "users", "segments", "flags"}, func(key string, _, v *yaml.Node) error {
		switch key {
		case "segments", "flags":
			return d.setupFlagsAndSegments(key, v, s)
		case "auth_required":
			var err error
			s.AuthRequired, err = d.boolean(v, "setup.auth_required")
			return err
		case "experiments":
			if v.Kind != yaml.SequenceNode {
				return d.errf(v, "setup.experiments: want a list, got %s", kindName(v))
			}
			for i, item := range v.Content {
				e, err := d.setupExperiment(resolve(item), i)
				if err != nil {
					return err
				}
				s.Experiments = append(s.Experiments, e)
			}
		case "users":
			if v.Kind != yaml.SequenceNode {
				return d.errf(v, "setup.users: want a list, got %s", kindName(v))
			}
			for i, item := range v.Content {
				u, err := d.setupUser(resolve(item), i)
				if err != nil {
					return err
				}
				s.Users = append(s.Users, u)
			}
		}
		return nil
	})
}

func (d *decoder) setupExperiment(n *yaml.Node, i int) (SetupExperiment, error) {
	what := fmt.Sprintf("setup.experiments[%d]", i)
	e := SetupExperiment{Line: n.Line}
	params := map[string]any{}
	err := d.mapping(n, what, setupExperimentKeys, func(key string, _, v *yaml.Node) error {
		switch key {
		case "status":
			s, err := d.str(v, what+".status")
			if err != nil {
				return err
			}
			st := upgrade.NormalizeState(s)
			if !st.Valid() {
				return d.errf(v, "%s.status: unknown state %q", what, s)
			}
			e.Status = string(st)
			return nil
		case "post_experiment_rule":
			if v.Kind == yaml.ScalarNode && !isNull(v) {
				params[key] = map[string]any{"rule": v.Value}
				return nil
			}
		}
		val, err := d.value(v, 0)
		if err != nil {
			return err
		}
		params[key] = val
		if key == "name" {
			e.Name, _ = val.(string)
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	if e.Name == "" {
		return e, d.errf(n, "%s: name is required", what)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return e, d.errf(n, "%s: %v", what, err)
	}
	if _, err := actions.Bind(string(actions.CreateExperiment), raw); err != nil {
		return e, d.errf(n, "%s (%s): %v", what, e.Name, err)
	}
	e.Params = raw
	return e, nil
}

func (d *decoder) setupUser(n *yaml.Node, i int) (SetupUser, error) {
	what := fmt.Sprintf("setup.users[%d]", i)
	u := SetupUser{Line: n.Line}
	err := d.mapping(n, what, []string{"id", "group", "working_group"}, func(key string, _, v *yaml.Node) error {
		var err error
		switch key {
		case "id":
			u.ID, err = d.str(v, what+".id")
		case "group":
			u.Group = map[string][]string{}
			if v.Kind != yaml.MappingNode {
				return d.errf(v, "%s.group: want {group type: [ids]}, got %s", what, kindName(v))
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				k, val := resolve(v.Content[j]), resolve(v.Content[j+1])
				ids, e := d.strList(val, what+".group."+k.Value)
				if e != nil {
					return e
				}
				u.Group[k.Value] = ids
			}
		case "working_group":
			if v.Kind != yaml.MappingNode {
				return d.errf(v, "%s.working_group: want {group type: id}, got %s", what, kindName(v))
			}
			u.WorkingGroup = map[string]string{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				k, val := resolve(v.Content[j]), resolve(v.Content[j+1])
				s, e := d.str(val, what+".working_group."+k.Value)
				if e != nil {
					return e
				}
				u.WorkingGroup[k.Value] = s
			}
		}
		return err
	})
	if err != nil {
		return u, err
	}
	if u.ID == "" {
		return u, d.errf(n, "%s: id is required", what)
	}
	return u, nil
}

func (d *decoder) steps(n *yaml.Node) ([]Step, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, "steps: want a list of steps (- say: ...), got %s", kindName(n))
	}
	out := make([]Step, 0, len(n.Content))
	for i, item := range n.Content {
		st, err := d.step(resolve(item), i+1)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (d *decoder) step(n *yaml.Node, num int) (Step, error) {
	what := fmt.Sprintf("step %d", num)
	st := Step{Line: n.Line}
	var kinds []string
	err := d.mapping(n, what, []string{"say", "answer", "resume", "llm", "expect"}, func(key string, _, v *yaml.Node) error {
		var err error
		switch key {
		case "say", "answer":
			kinds = append(kinds, key)
			st.Kind = key
			st.Text, err = d.str(v, what+"."+key)
		case "resume":
			kinds = append(kinds, key)
			st.Kind = StepResume
			if isNull(v) {
				return nil
			}
			err = d.mapping(v, what+".resume", []string{"wait", "timeout"}, func(key string, _, v *yaml.Node) error {
				var err error
				switch key {
				case "wait":
					st.Resume.Wait, err = d.boolean(v, what+".resume.wait")
				case "timeout":
					st.Resume.Timeout, err = d.duration(v, what+".resume.timeout")
				}
				return err
			})
		case "llm":
			st.LLM, err = d.replies(v, what)
		case "expect":
			err = d.expect(v, what, &st.Expect)
		}
		return err
	})
	if err != nil {
		return st, err
	}
	switch len(kinds) {
	case 0:
		return st, d.errf(n, "%s: needs one of say, answer or resume", what)
	case 1:
	default:
		return st, d.errf(n, "%s: has %s; a step is exactly one of say, answer or resume", what, strings.Join(kinds, " and "))
	}
	return st, nil
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

var expectKeys = []string{"status", "exit_code", "trace", "llm_calls", "response_contains", "response_matches",
	"confirmation", "actions", "errors", "output", "job", "backend", "termination_reason"}

var turnStatuses = []string{"completed", "awaiting_confirmation", "waiting_job", "terminated", "failed"}

func (d *decoder) expect(n *yaml.Node, step string, e *Expect) error {
	what := step + ".expect"
	return d.mapping(n, what, expectKeys, func(key string, _, v *yaml.Node) error {
		w := what + "." + key
		switch key {
		case "status":
			s, err := d.enum(v, w, turnStatuses...)
			e.Status = &s
			return err
		case "exit_code":
			c, err := d.nonNegative(v, w)
			e.ExitCode = &c
			return err
		case "trace":
			var tr []string
			if v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
				tr = []string{}
			} else {
				var err error
				if tr, err = d.strList(v, w); err != nil {
					return err
				}
			}
			e.Trace = &tr
		case "llm_calls":
			c, err := d.nonNegative(v, w)
			e.LLMCalls = &c
			return err
		case "response_contains":
			var err error
			e.ResponseContains, err = d.strList(v, w)
			return err
		case "response_matches":
			list, err := d.strList(v, w)
			if err != nil {
				return err
			}
			for _, re := range list {
				if _, err := regexp.Compile(templateRE.ReplaceAllString(re, "x")); err != nil {
					return d.errf(v, "%s: %q is not a valid regular expression: %v", w, re, err)
				}
			}
			e.ResponseMatches = list
		case "confirmation":
			c := &ExpectConfirmation{}
			err := d.mapping(v, w, []string{"action", "destructive", "message_contains"}, func(key string, _, v *yaml.Node) error {
				var err error
				switch key {
				case "action":
					c.Action, err = d.str(v, w+".action")
				case "destructive":
					var b bool
					b, err = d.boolean(v, w+".destructive")
					c.Destructive = &b
				case "message_contains":
					c.MessageContains, err = d.strList(v, w+".message_contains")
				}
				return err
			})
			e.Confirmation = c
			return err
		case "actions":
			list, err := d.expectActions(v, w)
			e.Actions = &list
			return err
		case "errors":
			list, err := d.expectErrors(v, w)
			e.Errors = &list
			return err
		case "output":
			val, err := d.value(v, 0)
			e.Output, e.HasOutput = val, true
			return err
		case "job":
			j := &ExpectJob{}
			err := d.mapping(v, w, []string{"state", "done", "total"}, func(key string, _, v *yaml.Node) error {
				var err error
				switch key {
				case "state":
					j.State, err = d.enum(v, w+".state", "queued", "running", "succeeded", "failed", "cancelled")
				case "done":
					var n int
					n, err = d.nonNegative(v, w+".done")
					j.Done = &n
				case "total":
					var n int
					n, err = d.nonNegative(v, w+".total")
					j.Total = &n
				}
				return err
			})
			e.Job = j
			return err
		case "backend":
			b := &ExpectBackend{}
			e.Backend = b
			return d.expectBackend(v, w, b)
		case "termination_reason":
			s, err := d.str(v, w)
			e.TerminationReason = &s
			return err
		}
		return nil
	})
}

func (d *decoder) expectActions(n *yaml.Node, what string) ([]ExpectAction, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, "%s: want a list ([] for none), got %s", what, kindName(n))
	}
	out := []ExpectAction{}
	for i, item := range n.Content {
		w := fmt.Sprintf("%s[%d]", what, i)
		var a ExpectAction
		err := d.mapping(resolve(item), w, []string{"action", "status", "params_subset", "result_subset", "error_contains"},
			func(key string, _, v *yaml.Node) error {
				var err error
				switch key {
				case "action":
					a.Action, err = d.str(v, w+".action")
				case "status":
					a.Status, err = d.enum(v, w+".status", "success", "error", "cancelled")
				case "params_subset":
					a.ParamsSubset, err = d.value(v, 0)
				case "result_subset":
					a.ResultSubset, err = d.value(v, 0)
				case "error_contains":
					a.ErrorContains, err = d.str(v, w+".error_contains")
				}
				return err
			})
		if err != nil {
			return nil, err
		}
		if a.Action == "" {
			return nil, d.errf(item, "%s: action is required", w)
		}
		out = append(out, a)
	}
	return out, nil
}

var errorTypes = []string{"api", "auth", "validation", "not_found", "unknown"}

func (d *decoder) expectErrors(n *yaml.Node, what string) ([]ExpectError, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, "%s: want a list ([] for none), got %s", what, kindName(n))
	}
	out := []ExpectError{}
	for i, item := range n.Content {
		w := fmt.Sprintf("%s[%d]", what, i)
		var e ExpectError
		err := d.mapping(resolve(item), w, []string{"type", "message_contains"}, func(key string, _, v *yaml.Node) error {
			var err error
			switch key {
			case "type":
				e.Type, err = d.enum(v, w+".type", errorTypes...)
			case "message_contains":
				e.MessageContains, err = d.str(v, w+".message_contains")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if e.Type == "" {
			return nil, d.errf(item, "%s: type is required", w)
		}
		out = append(out, e)
	}
	return out, nil
}

func (d *decoder) expectBackend(n *yaml.Node, what string, b *ExpectBackend) error {
	return d.mapping(n, what, []string{"experiments", "experiment_absent", "experiment_count", "users", "flags", "flag_absent", "segments", "segment_absent"}, func(key string, _, v *yaml.Node) error {
		w := what + "." + key
		switch key {
		case "flags", "flag_absent", "segments", "segment_absent":
			return d.expectFlags(key, v, w, b)
		case "experiments":
			list, err := d.subsetList(v, w, "name", setupExperimentKeys)
			b.Experiments = list
			return err
		case "experiment_absent":
			var err error
			b.ExperimentAbsent, err = d.strList(v, w)
			return err
		case "experiment_count":
			c, err := d.nonNegative(v, w)
			b.ExperimentCount = &c
			return err
		case "users":
			list, err := d.subsetList(v, w, "id", []string{"id", "group", "working_group"})
			b.Users = list
			return err
		}
		return nil
	})
}

// subsetList reads a list of mappings that each carry the identifying key
// and only known keys (so a typo in an expectation cannot pass silently).
func (d *decoder) subsetList(n *yaml.Node, what, idKey string, known []string) ([]map[string]any, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, "%s: want a list, got %s", what, kindName(n))
	}
	var out []map[string]any
	for i, item := range n.Content {
		item = resolve(item)
		w := fmt.Sprintf("%s[%d]", what, i)
		m := map[string]any{}
		err := d.mapping(item, w, known, func(key string, _, v *yaml.Node) error {
			if key == "post_experiment_rule" && v.Kind == yaml.ScalarNode && !isNull(v) {
				m[key] = map[string]any{"rule": v.Value}
				return nil
			}
			val, err := d.value(v, 0)
			if err != nil {
				return err
			}
			if key == "status" && idKey != "key" { // a flag's status is not an experiment state
				s, ok := val.(string)
				if !ok || !upgrade.NormalizeState(s).Valid() {
					return d.errf(v, "%s.status: unknown state %s", w, kindName(v))
				}
				val = string(upgrade.NormalizeState(s))
			}
			m[key] = val
			return nil
		})
		if err != nil {
			return nil, err
		}
		if id, ok := m[idKey].(string); !ok || id == "" {
			return nil, d.errf(item, "%s: %s is required", w, idKey)
		}
		out = append(out, m)
	}
	return out, nil
}

// insideFolder refuses a path (a cassette, an output schema) that is
// absolute or leads out of the scenario's folder, after cleaning and after
// resolving the symbolic links of the part that exists, unless
// AllowOutsidePaths. A scenario shared with others must not read or write
// files of theirs outside the folder they unpacked.
func (d *decoder) insideFolder(n *yaml.Node, what, p string) error {
	if d.opts.AllowOutsidePaths {
		return nil
	}
	const hint = "paths in a scenario are relative to its file and stay inside its folder (--allow-outside-paths lifts this)"
	if isAbsolute(p) {
		return d.errf(n, "%s: %s is an absolute path; %s", what, p, hint)
	}
	clean := filepath.Clean(filepath.FromSlash(p))
	if escapes(clean) {
		return d.errf(n, "%s: %s leads out of the scenario's folder; %s", what, p, hint)
	}
	base, err := filepath.Abs(d.dir)
	if err != nil {
		return nil
	}
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return nil // the folder does not exist (a file parsed from memory): nothing to follow
	}
	target := resolveExisting(filepath.Join(base, clean))
	if rel, err := filepath.Rel(realBase, target); err != nil || escapes(rel) {
		return d.errf(n, "%s: %s leads out of the scenario's folder through a symbolic link (to %s); %s", what, p, target, hint)
	}
	return nil
}

// isAbsolute is true for /x, C:\x, \x and \\host\share: anything not
// anchored at the scenario's folder, on any system.
func isAbsolute(p string) bool {
	return filepath.IsAbs(p) || filepath.VolumeName(p) != "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`)
}

// escapes reports whether a cleaned relative path climbs out of its base.
func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolveExisting resolves the symbolic links of the longest part of p that
// exists and keeps the rest as written (a cassette that record: will
// create, in a folder that may be a link).
func resolveExisting(p string) string {
	var rest []string
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
