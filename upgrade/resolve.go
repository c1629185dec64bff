package upgrade

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/textdist"
)

// One lookup of experiments, feature flags and segments, for the CLI's
// REF arguments (`experiments show`, `flags show|explain`, `segments
// show`) and the agent's find_* tools and param references alike: the
// same reference finds the same object wherever it is typed. Resolve
// picks the one object a reference means or says why it cannot; Find
// ranks the objects a search means, for a person or a model to choose.

// The kinds of object a reference names, as errors name them.
const (
	KindExperiment  = "experiment"
	KindFeatureFlag = "feature flag"
	KindSegment     = "segment"
)

// RefError says that a reference matched no object, or several. It is bad
// input (exitcode maps it to 2).
type RefError struct {
	Ref        string
	Candidates []ExperimentName // empty: nothing matched
	// Kind names what was looked for: "" = experiment, KindFeatureFlag,
	// KindSegment.
	Kind string
}

func (e *RefError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = KindExperiment
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

// Named is one object a reference can name.
type Named struct {
	ID   string
	Name string
	// Key is a flag's key ("" for the other kinds).
	Key string
	// Context is the app context of a flag or segment (a flag's first).
	Context string
}

// ExperimentsNamed, FlagsNamed and SegmentsNamed list objects for a
// Catalog.
func ExperimentsNamed(list []ExperimentName) []Named {
	out := make([]Named, 0, len(list))
	for _, e := range list {
		out = append(out, Named{ID: e.ID, Name: e.Name})
	}
	return out
}

func FlagsNamed(flags []FeatureFlag) []Named {
	out := make([]Named, 0, len(flags))
	for i := range flags {
		f := &flags[i]
		out = append(out, Named{ID: f.ID, Name: f.Name, Key: f.Key, Context: f.ContextName()})
	}
	return out
}

func SegmentsNamed(segs []SegmentRecord) []Named {
	out := make([]Named, 0, len(segs))
	for _, s := range segs {
		out = append(out, Named{ID: s.ID, Name: s.Name, Context: s.Context})
	}
	return out
}

// How a search matched an object (Match.How), best first.
const (
	MatchExactKey = "exact_key" // the id, or a flag's key as written
	MatchKey      = "key"       // a flag's key in another case
	MatchExact    = "exact"     // the name, in any case
	MatchPrefix   = "prefix"    // the start of the name or key, any case
	MatchContains = "contains"  // inside the name or key (a key's _ read as a blank too)
	MatchFuzzy    = "fuzzy"     // a name a few typing errors away
)

// Match is one object Find found, with how.
type Match struct {
	Named
	How   string
	score int
}

// Catalog is the objects of one kind a reference is looked up among.
type Catalog struct {
	Kind  string // KindExperiment, KindFeatureFlag, KindSegment
	Items []Named
	// Prefer is the app context a reference is about, when known: at each
	// stage of Resolve, matches in it beat matches in other contexts (a
	// segment name is unique per context only).
	Prefer string
}

// minIDPrefix is the shortest id prefix accepted: the ID column of the
// list commands shows eight characters.
const minIDPrefix = 4

// Resolve finds the one object ref names, trying in order: the id (any
// case), the key as written, the key in any case, the name as written,
// the name in any case, then a unique prefix of a name or key (any case)
// or of an id (at least four characters). Blanks around ref do not count.
// A stage with several matches is ambiguous and later stages are not
// tried, so an exact name always beats a longer name it prefixes. Nothing
// or several: a *RefError.
func (c Catalog) Resolve(ref string) (Named, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Named{}, &RefError{Ref: ref, Kind: c.kind()}
	}
	stages := []func(Named) bool{
		func(n Named) bool { return strings.EqualFold(n.ID, ref) },
		func(n Named) bool { return n.Key != "" && n.Key == ref },
		func(n Named) bool { return n.Key != "" && strings.EqualFold(n.Key, ref) },
		func(n Named) bool { return n.Name == ref },
		func(n Named) bool { return strings.EqualFold(n.Name, ref) },
		func(n Named) bool {
			return hasPrefixFold(n.Name, ref) || (n.Key != "" && hasPrefixFold(n.Key, ref)) ||
				(len(ref) >= minIDPrefix && hasPrefixFold(n.ID, ref))
		},
	}
	for _, match := range stages {
		found := c.preferred(slices.DeleteFunc(slices.Clone(c.Items), func(n Named) bool { return !match(n) }))
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		}
		return Named{}, &RefError{Ref: ref, Candidates: c.candidates(found), Kind: c.kind()}
	}
	return Named{}, &RefError{Ref: ref, Kind: c.kind()}
}

// preferred keeps the matches in the preferred context, if any is.
func (c Catalog) preferred(found []Named) []Named {
	if c.Prefer == "" {
		return found
	}
	in := slices.DeleteFunc(slices.Clone(found), func(n Named) bool { return n.Context != c.Prefer })
	if len(in) > 0 {
		return in
	}
	return found
}

func (c Catalog) kind() string {
	if c.Kind == KindExperiment {
		return "" // RefError's zero kind, as ResolveExperiment always said
	}
	return c.Kind
}

// candidates lists ambiguous matches by name (and context, for the kinds
// that have one), sorted.
func (c Catalog) candidates(found []Named) []ExperimentName {
	out := make([]ExperimentName, 0, len(found))
	for _, n := range found {
		name := n.Name
		if n.Context != "" {
			name += " (" + n.Context + ")"
		}
		out = append(out, ExperimentName{ID: n.ID, Name: name})
	}
	slices.SortFunc(out, func(a, b ExperimentName) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return out
}

// Find ranks the objects against q, best first and at most limit: the id
// or the key as written, the key in any case, the name in any case, a
// prefix, a substring, then names a few edits away. Ties go by key, then
// name.
func (c Catalog) Find(q string, limit int) []Match {
	q = strings.TrimSpace(q)
	ql := strings.ToLower(q)
	var all []Match
	for _, n := range c.Items {
		if how, score, ok := rank(n, q, ql); ok {
			all = append(all, Match{Named: n, How: how, score: score})
		}
	}
	slices.SortStableFunc(all, func(a, b Match) int {
		return cmp.Or(cmp.Compare(a.score, b.score), strings.Compare(a.Key, b.Key), strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return all[:min(len(all), max(limit, 0))]
}

func rank(n Named, q, ql string) (string, int, bool) {
	if q == "" {
		return "", 0, false
	}
	kl, nl := strings.ToLower(n.Key), strings.ToLower(n.Name)
	switch {
	case strings.EqualFold(n.ID, q) || n.Key != "" && n.Key == q:
		return MatchExactKey, 0, true
	case n.Key != "" && kl == ql:
		return MatchKey, 1, true
	case nl == ql:
		return MatchExact, 2, true
	case strings.HasPrefix(nl, ql) || n.Key != "" && strings.HasPrefix(kl, ql):
		return MatchPrefix, 3, true
	case strings.Contains(nl, ql) || n.Key != "" && (strings.Contains(kl, ql) || strings.Contains(strings.ReplaceAll(kl, "_", " "), ql)):
		return MatchContains, 4, true
	}
	if d := textdist.Levenshtein(nl, ql); d <= max(2, len(ql)/3) {
		return MatchFuzzy, 5 + d, true
	}
	return "", 0, false
}

// Unique is the one object a search means: the only match, or the best
// when it matched exactly (id, key or name) and the next did not match
// the same way.
func Unique(ms []Match) (Match, bool) {
	if len(ms) == 1 {
		return ms[0], true
	}
	exact := ms[0].How == MatchExactKey || ms[0].How == MatchKey || ms[0].How == MatchExact
	if len(ms) > 1 && exact && ms[0].How != ms[1].How {
		return ms[0], true
	}
	return Match{}, false
}

// ResolveExperiment finds the one experiment that ref names (Catalog.Resolve).
func ResolveExperiment(list []ExperimentName, ref string) (string, error) {
	n, err := Catalog{Kind: KindExperiment, Items: ExperimentsNamed(list)}.Resolve(ref)
	return n.ID, err
}

// ResolveFlag finds the one flag ref names: its id, its key (as written,
// then in any case), its name, or a unique prefix (Catalog.Resolve). Keys
// are unique per context only, so a key held by several flags is
// ambiguous.
func ResolveFlag(flags []FeatureFlag, ref string) (string, error) {
	n, err := Catalog{Kind: KindFeatureFlag, Items: FlagsNamed(flags)}.Resolve(ref)
	return n.ID, err
}

// ResolveSegment finds the one segment ref names (Catalog.Resolve).
func ResolveSegment(segs []SegmentRecord, ref string) (string, error) {
	n, err := Catalog{Kind: KindSegment, Items: SegmentsNamed(segs)}.Resolve(ref)
	return n.ID, err
}

func hasPrefixFold(s, prefix string) bool {
	return strings.HasPrefix(strings.ToLower(s), strings.ToLower(prefix))
}
