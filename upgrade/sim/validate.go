package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The enumerations the real server validates against.
var (
	// stateNames are the display names, then upgrade.AllStates (a literal
	// the compiler lays out; TestStateNames checks it against AllStates).
	stateNames = []string{"running", "paused", "completed",
		string(upgrade.StateInactive), string(upgrade.StatePreview), string(upgrade.StateScheduled),
		string(upgrade.StateEnrolling), string(upgrade.StateEnrollmentComplete), string(upgrade.StateCancelled),
		string(upgrade.StateArchived), string(upgrade.StateDraft)}
	consistencyRules = []string{upgrade.ConsistencyIndividual, upgrade.ConsistencyExperiment, upgrade.ConsistencyGroup}
	assignmentUnits  = []string{upgrade.UnitIndividual, upgrade.UnitGroup, upgrade.UnitWithinSubjects}
	postRules        = []string{upgrade.PostRuleContinue, upgrade.PostRuleRevert, upgrade.PostRuleAssign}
	experimentTypes  = []string{upgrade.TypeSimple, upgrade.TypeFactorial}
	algorithms       = []string{upgrade.AlgorithmRandom, upgrade.AlgorithmStratified, algorithmMooclet}
	payloadTypes     = []string{"string", "json", "csv"}
	segmentTypes     = []string{"public", "private", "global_exclude"}
	repeatedMeasures = []string{"MEAN", "EARLIEST", "MOST RECENT", "COUNT", "PERCENTAGE"}
	markStatuses     = []string{upgrade.MarkConditionApplied, upgrade.MarkConditionNotApplied, upgrade.MarkNoConditionAssigned}
	searchKeys       = []string{"all", "name", "status", "tag", "context", "id"}
	sortKeys         = []string{"name", "state", "updatedAt", "postExperimentRule"}
	sortDirections   = []string{"ASC", "DESC"}
)

// checker collects rule violations in the manner of class-validator: absent
// and null optional fields pass, "IsNotEmpty" rejects absent, null and "".
type checker struct {
	errs []string
	// fails carries, for each message of errs, the path and the names
	// of the class-validator constraints that failed (the import
	// routes' error texts name them; importErrorText).
	fails []failure
}

type failure struct {
	path string
	cons []string
}

func (c *checker) failf(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.failc(path, msg, constraintOf(msg))
}

// failc records a failure with the constraints that failed.
func (c *checker) failc(path, msg string, cons ...string) {
	c.errs = append(c.errs, path+": "+msg)
	c.fails = append(c.fails, failure{path: path, cons: cons})
}

// failEach records a failed element of an array checked with
// {each: true}: class-validator names the array, not the element.
func (c *checker) failEach(key string, i int, msg string) {
	c.failf(fmt.Sprintf("%s[%d]", key, i), "%s", msg)
	c.fails[len(c.fails)-1].path = key
}

// missing records a required field that is absent, null or "": class-
// validator fails its type constraint as well as isNotEmpty (for "" only
// isNotEmpty), and a nested one with null also nestedValidation.
func (c *checker) missing(m map[string]any, path, key, typeCon string) {
	v, ok := m[key]
	cons := []string{}
	if typeCon != "" && (v != "" || typeCon != "isString") {
		cons = append(cons, typeCon)
	}
	cons = append(cons, "isNotEmpty")
	if ok && v == nil && (typeCon == "isArray" || typeCon == "") && nestedKey(key) {
		cons = append(cons, "nestedValidation")
	}
	c.failc(join(path, key), "should not be empty", cons...)
}

// nestedKey reports the DTO fields under ValidateNested (a switch: a
// package-level map is built at init).
func nestedKey(key string) bool {
	switch key {
	case "conditions", "partitions", "factors", "levels", "queries",
		"stateTimeLogs", "conditionPayloads", "levelCombinationElements", "payload", "metric",
		"level", "segment", "experimentSegmentInclusion", "experimentSegmentExclusion",
		"individualForSegment", "groupForSegment", "subSegments", "stratificationFactor":
		return true
	}
	return false
}

// messageConstraints names the class-validator constraint behind each
// message of the checker (by prefix).
var messageConstraints = [][2]string{
	{"must be a string", "isString"}, {"must be one of", "isEnum"}, {"must be a number", "isNumber"},
	{"must be an integer number", "isInt"}, {"must be a boolean value", "isBoolean"},
	{"must be a valid ISO 8601 date string", "isDateString"}, {"must be an array", "isArray"},
	{"must be an object", "nestedValidation"}, {"must contain at least", "arrayMinSize"},
	{"should not be empty", "isNotEmpty"},
}

// constraintOf names the class-validator constraint behind a message of
// the checker.
func constraintOf(msg string) string {
	for _, mc := range messageConstraints {
		if strings.HasPrefix(msg, mc[0]) {
			return mc[1]
		}
	}
	return msg
}

func (c *checker) err() *apiError {
	if len(c.errs) == 0 {
		return nil
	}
	return badBody(strings.Join(c.errs, "; "))
}

func join(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func absent(v any, ok bool) bool { return !ok || v == nil }

// str checks a string field; required also means not "".
func (c *checker) str(m map[string]any, base, key string, required bool) string {
	v, ok := m[key]
	if absent(v, ok) {
		if required {
			c.missing(m, base, key, "isString")
		}
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		c.failf(join(base, key), "must be a string")
		return ""
	}
	if required && s == "" {
		c.missing(m, base, key, "isString")
	}
	return s
}

func (c *checker) enum(m map[string]any, base, key string, values []string, required bool) string {
	v, ok := m[key]
	if absent(v, ok) {
		if required {
			c.missing(m, base, key, "isEnum")
		}
		return ""
	}
	s, isStr := v.(string)
	if required && s == "" && isStr {
		c.missing(m, base, key, "isEnum")
		return ""
	}
	if !isStr || !slices.Contains(values, s) {
		c.failf(join(base, key), "must be one of: %s", strings.Join(values, ", "))
		return ""
	}
	return s
}

func (c *checker) number(m map[string]any, base, key string, integer, required bool) {
	v, ok := m[key]
	if absent(v, ok) {
		if required {
			con := "isNumber"
			if integer {
				con = "isInt"
			}
			c.missing(m, base, key, con)
		}
		return
	}
	notNumber := "isNumber"
	if integer {
		notNumber = "isInt"
	}
	n, isNum := v.(json.Number)
	if !isNum {
		c.failc(join(base, key), "must be a number", notNumber)
		return
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		c.failc(join(base, key), "must be a number", notNumber)
		return
	}
	if integer && f != math.Trunc(f) {
		c.failf(join(base, key), "must be an integer number")
	}
}

func (c *checker) boolean(m map[string]any, base, key string, required bool) {
	v, ok := m[key]
	if absent(v, ok) {
		if required {
			c.missing(m, base, key, "isBoolean")
		}
		return
	}
	if _, isBool := v.(bool); !isBool {
		c.failf(join(base, key), "must be a boolean value")
	}
}

var dateLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02"}

func isDate(s string) bool {
	for _, l := range dateLayouts {
		if _, err := time.Parse(l, s); err == nil {
			return true
		}
	}
	return false
}

func (c *checker) date(m map[string]any, base, key string, required bool) {
	v, ok := m[key]
	if absent(v, ok) {
		if required {
			c.missing(m, base, key, "isDateString")
		}
		return
	}
	if s, isStr := v.(string); !isStr || !isDate(s) {
		c.failf(join(base, key), "must be a valid ISO 8601 date string")
	}
}

// array returns the elements of an array field (nil when absent).
func (c *checker) array(m map[string]any, base, key string, required bool) ([]any, bool) {
	v, ok := m[key]
	if absent(v, ok) {
		if required {
			c.missing(m, base, key, "isArray")
		}
		return nil, false
	}
	a, isArr := v.([]any)
	if !isArr {
		c.failf(join(base, key), "must be an array")
		return nil, false
	}
	return a, true
}

// objects returns the elements of an array of objects.
func (c *checker) objects(m map[string]any, base, key string, required bool) []map[string]any {
	a, ok := c.array(m, base, key, required)
	if !ok {
		return nil
	}
	out := make([]map[string]any, 0, len(a))
	for i, el := range a {
		o, isObj := el.(map[string]any)
		if !isObj {
			c.failf(fmt.Sprintf("%s[%d]", join(base, key), i), "must be an object")
			continue
		}
		out = append(out, o)
	}
	return out
}

func (c *checker) object(m map[string]any, base, key string, required bool) map[string]any {
	v, ok := m[key]
	if absent(v, ok) {
		if required {
			c.missing(m, base, key, objectCon(key))
		}
		return nil
	}
	o, isObj := v.(map[string]any)
	if !isObj {
		c.failc(join(base, key), "must be an object", nonEmpty(objectCon(key), "nestedValidation"))
		return nil
	}
	return o
}

// objectCon is the constraint of an object field that is not nested: a
// query's query (IsObject); "" for the nested ones.
func objectCon(key string) string {
	if key == "query" {
		return "isObject"
	}
	return ""
}

func nonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func isAlnum(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// validateExperiment applies the rules of the server's ExperimentDTO.
func validateExperiment(m map[string]any) *apiError {
	return checkExperiment(m).err()
}

// checkExperiment is validateExperiment's checker with its failures.
func checkExperiment(m map[string]any) *checker {
	c := &checker{}
	c.str(m, "", "id", false)
	c.str(m, "", "name", true)
	c.str(m, "", "description", false)
	if ctx, ok := c.array(m, "", "context", true); ok {
		if len(ctx) == 0 {
			c.failf("context", "must contain at least 1 elements")
		}
		for i, v := range ctx {
			if _, isStr := v.(string); !isStr {
				c.failEach("context", i, "must be a string")
			}
		}
	}
	c.enum(m, "", "state", stateNames, true)
	c.date(m, "", "startOn", false)
	c.date(m, "", "endOn", false)
	unit := c.enum(m, "", "assignmentUnit", assignmentUnits, true)
	if s, _ := m["assignmentUnit"].(string); s != upgrade.UnitWithinSubjects {
		c.enum(m, "", "consistencyRule", consistencyRules, true)
	}
	group := c.str(m, "", "group", false)
	switch {
	case unit == upgrade.UnitGroup && group == "":
		c.failf("assignmentUnit", "When assignmentUnit is GROUP, group must be defined. When assignmentUnit is not GROUP, group must be null or undefined.")
	case unit != "" && unit != upgrade.UnitGroup && group != "":
		c.failf("assignmentUnit", "When assignmentUnit is GROUP, group must be defined. When assignmentUnit is not GROUP, group must be null or undefined.")
	}
	c.enum(m, "", "postExperimentRule", postRules, true)
	if c.enum(m, "", "assignmentAlgorithm", algorithms, false) == algorithmMooclet {
		c.object(m, "", "moocletPolicyParameters", true)
	}
	if v, ok := m["enrollmentCompleteCondition"]; !absent(v, ok) {
		if o := c.object(m, "", "enrollmentCompleteCondition", false); o != nil {
			c.number(o, "enrollmentCompleteCondition", "userCount", true, false)
			c.number(o, "enrollmentCompleteCondition", "groupCount", true, false)
		}
	}
	c.str(m, "", "revertTo", false)
	if tags, ok := c.array(m, "", "tags", true); ok {
		for i, v := range tags {
			if _, isStr := v.(string); !isStr {
				c.failEach("tags", i, "must be a string")
			}
		}
	}
	c.enum(m, "", "filterMode", upgrade.FilterModes(), true)
	c.enum(m, "", "type", experimentTypes, true)
	for i, o := range c.objects(m, "", "conditions", true) {
		base := fmt.Sprintf("conditions[%d]", i)
		c.str(o, base, "id", true)
		if tc := c.str(o, base, "twoCharacterId", false); tc != "" && (len(tc) != 2 || !isAlnum(tc)) {
			c.failf(join(base, "twoCharacterId"), "must be two letters or digits")
		}
		c.str(o, base, "description", false)
		c.str(o, base, "name", false)
		c.str(o, base, "conditionCode", true)
		c.number(o, base, "assignmentWeight", false, true)
		c.number(o, base, "order", true, true)
	}
	for i, o := range c.objects(m, "", "partitions", true) {
		base := fmt.Sprintf("partitions[%d]", i)
		c.str(o, base, "id", true)
		if tc := c.str(o, base, "twoCharacterId", false); tc != "" && len(tc) != 2 {
			c.failf(join(base, "twoCharacterId"), "must be two characters")
		}
		c.str(o, base, "site", true)
		c.str(o, base, "target", false)
		c.str(o, base, "description", false)
		c.number(o, base, "order", true, true)
		c.boolean(o, base, "excludeIfReached", true)
	}
	for i, o := range c.objects(m, "", "conditionPayloads", false) {
		base := fmt.Sprintf("conditionPayloads[%d]", i)
		c.str(o, base, "id", true)
		if p := c.object(o, base, "payload", true); p != nil {
			c.enum(p, join(base, "payload"), "type", payloadTypes, true)
			if v, ok := p["value"]; !ok {
				c.failf(join(base, "payload.value"), "must be a string")
			} else if _, isStr := v.(string); !isStr {
				c.failf(join(base, "payload.value"), "must be a string")
			}
		}
		c.str(o, base, "parentCondition", true)
		c.str(o, base, "decisionPoint", false)
	}
	for i, o := range c.objects(m, "", "queries", false) {
		base := fmt.Sprintf("queries[%d]", i)
		c.str(o, base, "id", false)
		c.str(o, base, "name", true)
		c.object(o, base, "query", true)
		if mt := c.object(o, base, "metric", true); mt != nil {
			c.str(mt, join(base, "metric"), "key", true)
		}
		c.enum(o, base, "repeatedMeasure", repeatedMeasures, true)
	}
	for i, o := range c.objects(m, "", "stateTimeLogs", false) {
		base := fmt.Sprintf("stateTimeLogs[%d]", i)
		c.str(o, base, "id", true)
		c.enum(o, base, "fromState", stateNames, true)
		c.enum(o, base, "toState", stateNames, true)
		c.date(o, base, "timeLog", true)
	}
	for _, key := range []string{"experimentSegmentInclusion", "experimentSegmentExclusion"} {
		c.segments(m, key)
	}
	c.validateDesign(m)
	return c
}

// segments accepts both wire shapes: the 6.5 array of {segment} and the 6.2
// single {segment}.
func (c *checker) segments(m map[string]any, key string) {
	v, ok := m[key]
	if absent(v, ok) {
		return
	}
	var items []map[string]any
	switch t := v.(type) {
	case map[string]any:
		items = []map[string]any{t}
	case []any:
		items = c.objects(m, "", key, false)
	default:
		c.failf(key, "must be an array")
		return
	}
	for i, it := range items {
		base := fmt.Sprintf("%s[%d]", key, i)
		seg := c.object(it, base, "segment", true)
		if seg == nil {
			continue
		}
		sb := join(base, "segment")
		for _, k := range []string{"id", "name", "description", "context", "listType"} {
			c.str(seg, sb, k, false)
		}
		if v, ok := seg["type"]; !ok {
			c.failf(join(sb, "type"), "must be one of: %s", strings.Join(segmentTypes, ", "))
		} else if s, isStr := v.(string); !isStr || !slices.Contains(segmentTypes, s) {
			c.failf(join(sb, "type"), "must be one of: %s", strings.Join(segmentTypes, ", "))
		}
		for j, u := range c.objects(seg, sb, "individualForSegment", false) {
			c.str(u, fmt.Sprintf("%s.individualForSegment[%d]", sb, j), "userId", true)
		}
		for j, g := range c.objects(seg, sb, "groupForSegment", false) {
			gb := fmt.Sprintf("%s.groupForSegment[%d]", sb, j)
			c.str(g, gb, "groupId", true)
			c.str(g, gb, "type", true)
		}
		for j, ss := range c.objects(seg, sb, "subSegments", false) {
			c.str(ss, fmt.Sprintf("%s.subSegments[%d]", sb, j), "id", true)
		}
	}
}
