package sim

import (
	"slices"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
)

// The error text of POST /experiments/validation and /experiments/import:
// ExperimentService.validateExperimentJSON joins class-validator's
// ValidationError.toString() of each failing top-level property with ", ",
// after cutting "An instance of ExperimentDTO has failed the validation:\n
// - " from each. A property's own failure reads "property P has failed the
// following constraints: a, b \n"; failures below it follow as " - property
// P.x ... \n" (probed on a real 6.5.0, docs/upgrade-real.md).

// dtoOrder is ExperimentDTO's property order as class-validator walks it:
// the class's own properties first, then those of its base class.
var dtoOrder = []string{"conditionPayloads", "moocletPolicyParameters", "id", "name", "description", "context", "state",
	"startOn", "consistencyRule", "assignmentUnit", "postExperimentRule", "assignmentAlgorithm",
	"enrollmentCompleteCondition", "endOn", "revertTo", "tags", "group", "conditionOrder", "filterMode",
	"stratificationFactor", "conditions", "factors", "partitions", "queries", "stateTimeLogs",
	"experimentSegmentInclusion", "experimentSegmentExclusion", "backendVersion", "type"}

// constraintOrder lists, for the fields whose decorators do not put
// @IsNotEmpty() above the type check, the order class-validator reports
// their constraints in (the decorators' bottom-up order). Every other
// field reports its type constraint, then isNotEmpty, then
// nestedValidation.
// (A switch: a package-level map is built at init.)
func constraintOrder(field string) []string {
	switch field {
	case "name", "queries.name", "stratificationFactor.stratificationFactorName":
		return []string{"isNotEmpty", "isString"}
	case "queries.query":
		return []string{"isNotEmpty", "isObject"}
	case "experimentSegmentInclusion.segment.type", "experimentSegmentExclusion.segment.type":
		return []string{"isEnum", "isString"}
	case "context":
		return []string{"isString", "arrayMinSize", "isArray", "isNotEmpty"}
	case "tags":
		return []string{"isString", "isArray", "isNotEmpty"}
	case "factors.levels.payload.value", "conditionPayloads.payload.value":
		return []string{"isString"}
	}
	return nil
}

var indexRe = lazyre.Of(`\[\d+\]`)

func topKey(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// firstIndex is the index of the path's first array element (-1 for none).
func firstIndex(path string) int {
	rest := strings.TrimPrefix(path, topKey(path))
	if !strings.HasPrefix(rest, "[") {
		return -1
	}
	n, err := strconv.Atoi(rest[1:strings.IndexByte(rest, ']')])
	if err != nil {
		return -1
	}
	return n
}

// importErrorText writes the checker's failures as the import routes do.
func importErrorText(fails []failure) string {
	type prop struct {
		path string
		cons []string
	}
	var props []*prop
	byPath := map[string]*prop{}
	for _, f := range fails {
		p := byPath[f.path]
		if p == nil {
			p = &prop{path: f.path}
			byPath[f.path] = p
			props = append(props, p)
		}
		for _, c := range f.cons {
			if !slices.Contains(p.cons, c) {
				p.cons = append(p.cons, c)
			}
		}
	}
	rank := func(p *prop) int {
		if i := slices.Index(dtoOrder, topKey(p.path)); i >= 0 {
			return i
		}
		return len(dtoOrder)
	}
	slices.SortStableFunc(props, func(a, b *prop) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return firstIndex(a.path) - firstIndex(b.path)
	})
	var groups []string
	var cur strings.Builder
	last := ""
	for i, p := range props {
		order := constraintOrder(indexRe.Get().ReplaceAllString(p.path, ""))
		if order == nil {
			order = []string{"isString", "isEnum", "isNumber", "isInt", "isBoolean", "isDateString", "isObject", "isArray", "arrayMinSize", "isNotEmpty", "nestedValidation"}
		}
		slices.SortStableFunc(p.cons, func(a, b string) int { return rankIn(order, a) - rankIn(order, b) })
		line := "property " + p.path + " has failed the following constraints: " + strings.Join(p.cons, ", ") + " \n"
		if i > 0 && topKey(p.path) == last {
			cur.WriteString(" - " + line)
			continue
		}
		if i > 0 {
			groups = append(groups, cur.String())
			cur.Reset()
		}
		cur.WriteString(line)
		last = topKey(p.path)
	}
	if len(props) > 0 {
		groups = append(groups, cur.String())
	}
	return strings.Join(groups, ", ")
}

func rankIn(order []string, c string) int {
	if i := slices.Index(order, c); i >= 0 {
		return i
	}
	return len(order)
}
