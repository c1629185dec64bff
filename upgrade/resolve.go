package upgrade

import (
	"fmt"
	"sort"
	"strings"
)

// RefError says that an experiment reference matched no experiment, or
// several. It is bad input (exitcode maps it to 2).
type RefError struct {
	Ref        string
	Candidates []ExperimentName // empty: nothing matched
	// Kind names what was looked for: "" = experiment, "feature flag",
	// "segment".
	Kind string
}

func (e *RefError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = "experiment"
	}
	if len(e.Candidates) == 0 {
		return fmt.Sprintf("no %s matches %q", kind, e.Ref)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%q matches %d %ss; use the full name or the id:", e.Ref, len(e.Candidates), kind)
	for _, c := range e.Candidates {
		fmt.Fprintf(&b, "\n  %s  %s", c.ID, c.Name)
	}
	return b.String()
}

// minIDPrefix is the shortest id prefix accepted: the ID column of
// "experiments list" shows eight characters.
const minIDPrefix = 4

// ResolveExperiment finds the one experiment that ref names, trying in
// order: an exact id, an exact name, a name differing only in case, then a
// unique prefix of a name (any case) or of an id (at least four
// characters). A stage with several matches is ambiguous: later stages are
// not tried, so an exact name always beats a longer name it prefixes.
func ResolveExperiment(list []ExperimentName, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", &RefError{Ref: ref}
	}
	stages := []func(ExperimentName) bool{
		func(e ExperimentName) bool { return e.ID == ref },
		func(e ExperimentName) bool { return e.Name == ref },
		func(e ExperimentName) bool { return strings.EqualFold(e.Name, ref) },
		func(e ExperimentName) bool {
			return hasPrefixFold(e.Name, ref) ||
				(len(ref) >= minIDPrefix && strings.HasPrefix(strings.ToLower(e.ID), strings.ToLower(ref)))
		},
	}
	for _, match := range stages {
		var found []ExperimentName
		for _, e := range list {
			if match(e) {
				found = append(found, e)
			}
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0].ID, nil
		}
		sort.Slice(found, func(i, j int) bool {
			if found[i].Name != found[j].Name {
				return found[i].Name < found[j].Name
			}
			return found[i].ID < found[j].ID
		})
		return "", &RefError{Ref: ref, Candidates: found}
	}
	return "", &RefError{Ref: ref}
}

func hasPrefixFold(s, prefix string) bool {
	return strings.HasPrefix(strings.ToLower(s), strings.ToLower(prefix))
}
