package actions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// ParseError lists everything wrong with the shape of an action's params:
// unknown fields, wrong types, broken JSON. Each Problem names the field by
// its path (conditions[1].weight) so that the model can fix exactly that.
type ParseError struct {
	Action   Name
	Problems []Problem
}

func (e *ParseError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Field == "" {
			parts[i] = p.Message
		} else {
			parts[i] = p.Field + ": " + p.Message
		}
	}
	return fmt.Sprintf("%s params: %s", e.Action, strings.Join(parts, "; "))
}

// Parse decodes the params of the named action strictly: unknown fields,
// wrong JSON types, fractional counts and trailing data are errors naming
// the field. Enumerations are normalised (case, display state names) so the
// typed params hold UpGrade's spelling. raw may be empty or null for {}.
func Parse(name string, raw json.RawMessage) (Params, error) {
	spec, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownAction, name, knownNames())
	}
	typ := reflect.TypeOf(spec.Params)
	perr := &ParseError{Action: spec.Name}

	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		perr.Problems = append(perr.Problems, Problem{Message: "not valid JSON: " + jsonErrorText(err)})
		return nil, perr
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		perr.Problems = append(perr.Problems, Problem{Message: "unexpected data after the params object"})
		return nil, perr
	}
	checkShape(tree, typ, "", &perr.Problems)
	if len(perr.Problems) > 0 {
		return nil, perr
	}
	ptr := reflect.New(typ)
	if err := json.Unmarshal(trimmed, ptr.Interface()); err != nil {
		// checkShape accepts only what Unmarshal accepts; this is a
		// safety net, not an expected path.
		perr.Problems = append(perr.Problems, Problem{Message: jsonErrorText(err)})
		return nil, perr
	}
	p := ptr.Elem().Interface().(Params)
	return normalize(p), nil
}

// Canonical is the one JSON form of p: the form shown to the person, hashed
// into params_hash and executed. It is Parse's output marshalled with the
// struct's fixed field order (maps sorted by key), so a value and its
// re-parsed canonical form always give identical bytes.
func Canonical(p Params) (json.RawMessage, error) {
	q, err := canonicalParams(p)
	if err != nil {
		return nil, fmt.Errorf("canonical: %w", err)
	}
	out, err := json.Marshal(q)
	if err != nil {
		return nil, fmt.Errorf("canonical %s: %w", q.Action(), err)
	}
	return out, nil
}

// canonicalParams is p in canonical form: normalised spellings, and a deep
// copy, so that normalising never touches the caller's value.
func canonicalParams(p Params) (Params, error) {
	p = unwrap(p)
	if p == nil {
		return nil, errors.New("no params")
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%s params: %w", p.Action(), err)
	}
	return Parse(string(p.Action()), raw)
}

func jsonErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the JSON ends too early"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// checkShape walks the decoded JSON against the Go type and records every
// mismatch with its path. encoding/json stops at the first error and does
// not name the path of an unknown field; the model deserves both.
func checkShape(v any, t reflect.Type, path string, out *[]Problem) {
	if v == nil {
		return // null leaves the field at its zero value: "not given"
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkShape(v, t.Elem(), path, out)
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			addShape(out, path, "an object", v)
			return
		}
		fields := jsonFields(t)
		keys := sortedKeys(obj)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				*out = append(*out, Problem{Field: join(path, k),
					Message: fmt.Sprintf("unknown field (known fields: %s)", strings.Join(fieldNames(t), ", "))})
				continue
			}
			checkShape(obj[k], f.Type, join(path, k), out)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			addShape(out, path, "an object", v)
			return
		}
		for _, k := range sortedKeys(obj) {
			checkShape(obj[k], t.Elem(), join(path, k), out)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			addShape(out, path, "a list", v)
			return
		}
		for i, item := range arr {
			checkShape(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			addShape(out, path, "a string", v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			addShape(out, path, "true or false", v)
		}
	case reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			addShape(out, path, "a number", v)
			return
		}
		if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
			*out = append(*out, Problem{Field: path, Message: fmt.Sprintf("number %s is out of range", n)})
		}
	case reflect.Int:
		n, ok := v.(json.Number)
		if !ok {
			addShape(out, path, "a whole number", v)
			return
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			*out = append(*out, Problem{Field: path, Message: fmt.Sprintf("expected a whole number, got %s", n)})
			return
		}
		if i > math.MaxInt32 || i < math.MinInt32 {
			*out = append(*out, Problem{Field: path, Message: fmt.Sprintf("number %s is out of range", n)})
		}
	}
}

func addShape(out *[]Problem, path, want string, got any) {
	*out = append(*out, Problem{Field: path, Message: fmt.Sprintf("expected %s, got %s", want, describe(got))})
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		s := x
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return "a string " + strconv.Quote(s)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	m := make(map[string]reflect.StructField, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && f.Tag.Get("json") != "-" {
			m[jsonName(f)] = f
		}
	}
	return m
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && f.Tag.Get("json") != "-" {
			names = append(names, jsonName(f))
		}
	}
	return names
}

// normalize folds spellings: enumerations to UpGrade's case, state display
// names to internal ones, surrounding blanks off identifiers. Values it does
// not recognise are kept, so that Validate can name them.
func normalize(p Params) Params {
	switch v := p.(type) {
	case CreateExperimentParams:
		normDesign(&v)
		return v
	case UpdateExperimentParams:
		v.ExperimentID = strings.TrimSpace(v.ExperimentID)
		trimPtr(v.Name)
		trimPtr(v.Context)
		if v.DecisionPoints != nil {
			normDecisionPoints(*v.DecisionPoints)
		}
		if v.Conditions != nil {
			normConditions(*v.Conditions)
		}
		enumPtr(v.AssignmentUnit, units)
		trimPtr(v.GroupType)
		enumPtr(v.ConsistencyRule, consistencies)
		normPostRule(v.PostExperimentRule)
		enumPtr(v.FilterMode, filterModes)
		if v.InclusionUsers != nil {
			trimAll(*v.InclusionUsers)
		}
		if v.ExclusionUsers != nil {
			trimAll(*v.ExclusionUsers)
		}
		if v.InclusionGroups != nil {
			normGroups(*v.InclusionGroups)
		}
		if v.ExclusionGroups != nil {
			normGroups(*v.ExclusionGroups)
		}
		return v
	case UpdateExperimentStatusParams:
		v.ExperimentID = strings.TrimSpace(v.ExperimentID)
		v.Status = strings.TrimSpace(v.Status)
		if st := upgrade.NormalizeState(v.Status); st.Valid() {
			v.Status = string(st)
		}
		return v
	case DeleteExperimentParams:
		v.ExperimentID = strings.TrimSpace(v.ExperimentID)
		return v
	case InitExperimentUserParams:
		v.UserID = strings.TrimSpace(v.UserID)
		return v
	case GetDecisionPointAssignmentsParams:
		v.UserID = strings.TrimSpace(v.UserID)
		v.Context = strings.TrimSpace(v.Context)
		return v
	case MarkDecisionPointParams:
		v.UserID = strings.TrimSpace(v.UserID)
		v.DecisionPoint.Site = strings.TrimSpace(v.DecisionPoint.Site)
		v.DecisionPoint.Target = strings.TrimSpace(v.DecisionPoint.Target)
		if v.AssignedCondition != nil {
			v.AssignedCondition.ConditionCode = strings.TrimSpace(v.AssignedCondition.ConditionCode)
			v.AssignedCondition.ExperimentID = strings.TrimSpace(v.AssignedCondition.ExperimentID)
		}
		v.Status = enumValue(v.Status, markStatuses)
		return v
	case VisitDecisionPointParams:
		v.UserID = strings.TrimSpace(v.UserID)
		v.Context = strings.TrimSpace(v.Context)
		v.Site = strings.TrimSpace(v.Site)
		v.Target = strings.TrimSpace(v.Target)
		return v
	case BalanceParams:
		v.Context = strings.TrimSpace(v.Context)
		v.Site = strings.TrimSpace(v.Site)
		v.Target = strings.TrimSpace(v.Target)
		v.ExperimentID = strings.TrimSpace(v.ExperimentID)
		return v
	}
	return p
}

var (
	units         = []string{upgrade.UnitIndividual, upgrade.UnitGroup, upgrade.UnitWithinSubjects}
	consistencies = []string{upgrade.ConsistencyIndividual, upgrade.ConsistencyGroup, upgrade.ConsistencyExperiment}
	postRules     = []string{upgrade.PostRuleContinue, upgrade.PostRuleAssign, upgrade.PostRuleRevert}
	filterModes   = []string{upgrade.FilterIncludeAll, upgrade.FilterExcludeAll}
	markStatuses  = []string{upgrade.MarkConditionApplied, upgrade.MarkConditionNotApplied, upgrade.MarkNoConditionAssigned}
)

// enumValue returns the allowed spelling that s matches ignoring case,
// blanks, and _/- differences; otherwise s trimmed.
func enumValue(s string, allowed []string) string {
	t := strings.TrimSpace(s)
	key := enumKey(t)
	for _, a := range allowed {
		if enumKey(a) == key {
			return a
		}
	}
	return t
}

func enumKey(s string) string {
	r := strings.NewReplacer("_", "", "-", "", " ", "")
	return strings.ToLower(r.Replace(s))
}

func enumPtr(s *string, allowed []string) {
	if s != nil {
		*s = enumValue(*s, allowed)
	}
}

func trimPtr(s *string) {
	if s != nil {
		*s = strings.TrimSpace(*s)
	}
}

func trimAll(list []string) {
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
}

func normDesign(d *CreateExperimentParams) {
	d.Name = strings.TrimSpace(d.Name)
	d.Context = strings.TrimSpace(d.Context)
	normDecisionPoints(d.DecisionPoints)
	normConditions(d.Conditions)
	d.AssignmentUnit = enumValue(d.AssignmentUnit, units)
	d.GroupType = strings.TrimSpace(d.GroupType)
	d.ConsistencyRule = enumValue(d.ConsistencyRule, consistencies)
	normPostRule(d.PostExperimentRule)
	d.FilterMode = enumValue(d.FilterMode, filterModes)
	trimAll(d.InclusionUsers)
	trimAll(d.ExclusionUsers)
	normGroups(d.InclusionGroups)
	normGroups(d.ExclusionGroups)
}

func normDecisionPoints(dps []DecisionPointParam) {
	for i := range dps {
		dps[i].Site = strings.TrimSpace(dps[i].Site)
		dps[i].Target = strings.TrimSpace(dps[i].Target)
	}
}

func normConditions(cs []ConditionParam) {
	for i := range cs {
		cs[i].Code = strings.TrimSpace(cs[i].Code)
	}
}

func normGroups(gs []GroupParam) {
	for i := range gs {
		gs[i].Type = strings.TrimSpace(gs[i].Type)
		gs[i].GroupID = strings.TrimSpace(gs[i].GroupID)
	}
}

func normPostRule(r *PostRuleParam) {
	if r == nil {
		return
	}
	r.Rule = enumValue(r.Rule, postRules)
	r.ConditionCode = strings.TrimSpace(r.ConditionCode)
	// "default" is how people name the no-condition fallback; the API
	// spells it as no code (revertTo null).
	if strings.EqualFold(r.ConditionCode, "default") {
		r.ConditionCode = ""
	}
}
