package upgrade

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A small catalog of each kind, with the traps models and people hit: a
// name that prefixes another, a key shared by two contexts, a segment name
// used in two contexts, ids that share a prefix.
var (
	testFlags = []FeatureFlag{
		{ID: "a1b2c3d4-0000-4000-8000-000000000001", Key: "MATH_HINTS", Name: "Math hints", Context: []string{"assign-prog"}},
		{ID: "a1b2c3d4-0000-4000-8000-000000000002", Key: "MATH_HINTS", Name: "Math hints (mobile)", Context: []string{"mobile"}},
		{ID: "f00dcafe-0000-4000-8000-000000000003", Key: "TUTORBOT", Name: "Tutor bot", Context: []string{"assign-prog"}},
		{ID: "f00dbeef-0000-4000-8000-000000000004", Key: "dark_mode", Name: "Dark mode", Context: []string{"assign-prog"}},
	}
	testSegs = []SegmentRecord{
		{ID: "5e9a0000-0000-4000-8000-000000000001", Name: "pilot schools", Context: "assign-prog"},
		{ID: "5e9a0000-0000-4000-8000-000000000002", Name: "pilot schools", Context: "mobile"},
		{ID: "5e9b0000-0000-4000-8000-000000000003", Name: "stream testers", Context: "assign-prog"},
	}
)

func TestCatalogResolve(t *testing.T) {
	flags := Catalog{Kind: KindFeatureFlag, Items: FlagsNamed(testFlags)}
	segs := Catalog{Kind: KindSegment, Items: SegmentsNamed(testSegs)}
	for _, tc := range []struct {
		name    string
		cat     Catalog
		ref     string
		want    string // id; "" = an error
		several int    // candidates of the error
	}{
		{"flag id", flags, "f00dcafe-0000-4000-8000-000000000003", "f00dcafe-0000-4000-8000-000000000003", 0},
		{"flag id in upper case with blanks", flags, "  F00DCAFE-0000-4000-8000-000000000003 ", "f00dcafe-0000-4000-8000-000000000003", 0},
		{"key as written", flags, "TUTORBOT", "f00dcafe-0000-4000-8000-000000000003", 0},
		{"key in another case", flags, "tutorbot", "f00dcafe-0000-4000-8000-000000000003", 0},
		{"key with a stray space", flags, "dark_mode ", "f00dbeef-0000-4000-8000-000000000004", 0},
		{"display name", flags, "Dark mode", "f00dbeef-0000-4000-8000-000000000004", 0},
		{"name in any case", flags, "DARK MODE", "f00dbeef-0000-4000-8000-000000000004", 0},
		{"key shared by two contexts", flags, "MATH_HINTS", "", 2},
		{"exact name beats the longer name it prefixes", flags, "Math hints", "a1b2c3d4-0000-4000-8000-000000000001", 0},
		{"unique prefix of a key", flags, "tut", "f00dcafe-0000-4000-8000-000000000003", 0},
		{"ambiguous prefix", flags, "math", "", 2},
		{"id prefix of four", flags, "f00dc", "f00dcafe-0000-4000-8000-000000000003", 0},
		{"id prefix too short", flags, "f00", "", 0},
		{"nothing", flags, "nothing", "", 0},
		{"empty", flags, "  ", "", 0},
		{"segment name in two contexts", segs, "pilot schools", "", 2},
		{"segment prefix", segs, "stream", "5e9b0000-0000-4000-8000-000000000003", 0},
		{"segment name in the preferred context", Catalog{Kind: KindSegment, Items: segs.Items, Prefer: "mobile"}, "Pilot Schools", "5e9a0000-0000-4000-8000-000000000002", 0},
		{"preference does not hide the only match elsewhere", Catalog{Kind: KindSegment, Items: segs.Items, Prefer: "mobile"}, "stream testers", "5e9b0000-0000-4000-8000-000000000003", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cat.Resolve(tc.ref)
			if tc.want != "" {
				if err != nil || got.ID != tc.want {
					t.Fatalf("Resolve(%q) = %s, %v; want %s", tc.ref, got.ID, err, tc.want)
				}
				return
			}
			var re *RefError
			if !errors.As(err, &re) {
				t.Fatalf("Resolve(%q) = %s, %v; want a *RefError", tc.ref, got.ID, err)
			}
			if len(re.Candidates) != tc.several || re.Kind != tc.cat.Kind {
				t.Fatalf("Resolve(%q): %v with %d candidates of kind %q, want %d of %q", tc.ref, err, len(re.Candidates), re.Kind, tc.several, tc.cat.Kind)
			}
		})
	}
}

// The CLI's functions are the catalog's, with the messages the CLI prints.
func TestResolveFlagAndSegmentMessages(t *testing.T) {
	_, err := ResolveFlag(testFlags, "MATH_HINTS")
	want := "\"MATH_HINTS\" matches 2 feature flags; use the full name or the id:\n" +
		"  a1b2c3d4-0000-4000-8000-000000000001  Math hints (assign-prog)\n" +
		"  a1b2c3d4-0000-4000-8000-000000000002  Math hints (mobile) (mobile)"
	if err == nil || err.Error() != want {
		t.Errorf("ambiguous key:\n%v\nwant\n%s", err, want)
	}
	if _, err := ResolveSegment(testSegs, "nothing"); err == nil || err.Error() != `no segment matches "nothing"` {
		t.Errorf("no segment: %v", err)
	}
	if id, err := ResolveExperiment([]ExperimentName{{ID: "e1", Name: "Math Hints"}}, " math hints "); err != nil || id != "e1" {
		t.Errorf("experiment by name in another case: %s %v", id, err)
	}
}

func TestCatalogFind(t *testing.T) {
	flags := Catalog{Kind: KindFeatureFlag, Items: FlagsNamed(testFlags)}
	how := func(ms []Match) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Key+":"+m.How)
		}
		return out
	}
	for _, tc := range []struct {
		q      string
		limit  int
		want   []string
		unique bool
	}{
		{"TUTORBOT", 5, []string{"TUTORBOT:exact_key"}, true},
		{"Tutorbot", 5, []string{"TUTORBOT:key"}, true},
		{"dark mode", 5, []string{"dark_mode:exact"}, true},
		{"mode", 5, []string{"dark_mode:contains"}, true},
		{"math", 5, []string{"MATH_HINTS:prefix", "MATH_HINTS:prefix"}, false},
		{"math", 1, []string{"MATH_HINTS:prefix"}, true},
		{"Tutr bot", 5, []string{"TUTORBOT:fuzzy"}, true},
		{"  ", 5, nil, false},
		{"zzzzzzzzzz", 5, nil, false},
	} {
		ms := flags.Find(tc.q, tc.limit)
		if diff := cmp.Diff(tc.want, how(ms)); diff != "" {
			t.Errorf("Find(%q) (-want +got):\n%s", tc.q, diff)
		}
		if len(ms) > 0 {
			if _, ok := Unique(ms); ok != tc.unique {
				t.Errorf("Find(%q): unique %v, want %v", tc.q, ok, tc.unique)
			}
		}
	}
	// An exact name is the one meant even when longer names start with it.
	exps := Catalog{Kind: KindExperiment, Items: ExperimentsNamed([]ExperimentName{{ID: "2", Name: "Math Hints v2"}, {ID: "1", Name: "Math Hints"}})}
	ms := exps.Find("math hints", 5)
	if u, ok := Unique(ms); !ok || u.ID != "1" || ms[0].How != MatchExact || ms[1].How != MatchPrefix {
		t.Errorf("Find(math hints) = %+v, unique %v", ms, ok)
	}
}

// One list of flag statuses and filter modes, and one folding of how
// people and models write them.
func TestFlagStatusAndFilterModeNames(t *testing.T) {
	for in, want := range map[string]string{"enabled": "enabled", " Enabled ": "enabled", "DISABLED": "disabled", "Archived": "archived", "": "", " on ": "on", "bogus": "bogus"} {
		if got := FlagStatusOf(in); got != want {
			t.Errorf("FlagStatusOf(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"includeAll": "includeAll", "include all": "includeAll", "EXCLUDE_ALL": "excludeAll", " exclude-all ": "excludeAll", "all": "all"} {
		if got := FilterModeOf(in); got != want {
			t.Errorf("FilterModeOf(%q) = %q, want %q", in, got, want)
		}
	}
	s := FlagStatuses()
	s[0] = "changed"
	if FlagStatuses()[0] != FlagEnabled {
		t.Error("FlagStatuses hands out a shared slice")
	}
}
