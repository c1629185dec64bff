package sim

import (
	"fmt"
	"math"
	"testing"
)

// The seeded-assignment vectors of UpGrade 6.5 (upgrade-results-designs.md
// section 6): r = seedrandom(experimentId + "_" + userId)() * 100.
func TestSeedRandomMatchesServerVectors(t *testing.T) {
	const exp = "7e5a1d00-0000-4000-8000-00000000d051"
	want := []float64{35.083, 3.302, 84.239, 26.278, 49.506, 55.132, 54.641, 36.795}
	for i, w := range want {
		got := seedRandom(fmt.Sprintf("%s_probe-ds-seed-u%d", exp, i)) * 100
		if math.Abs(got-w) > 0.0005 {
			t.Errorf("u%d: r = %.4f, want %.3f", i, got, w)
		}
	}
}

// seedrandom's own published example: seedrandom('hello.')() is
// 0.9282578795792454.
func TestSeedRandomPublishedExample(t *testing.T) {
	if got := seedRandom("hello."); got != 0.9282578795792454 {
		t.Fatalf("seedrandom('hello.') = %v, want 0.9282578795792454", got)
	}
}

func TestSeedRandomEdgeKeys(t *testing.T) {
	for _, s := range []string{"", "é_ü", string(make([]byte, 600))} {
		if v := seedRandom(s); v < 0 || v >= 1 {
			t.Errorf("seedRandom(%q) = %v, outside [0,1)", s, v)
		}
	}
}

// The conditions of the section-6 vectors, through /v6/assign: an
// experiment created with the vectors' id draws as the server did.
func TestAssignDrawsLikeServer(t *testing.T) {
	const exp = "7e5a1d00-0000-4000-8000-00000000d051"
	for _, tc := range []struct {
		control float64
		want    string
	}{{50, "ccvccvvc"}, {30, "vcvcvvvv"}} {
		t.Run(fmt.Sprint(tc.control), func(t *testing.T) {
			ts := startSim(t, Options{Seed: 99})
			e := ts.create(expBody("seeded", func(m map[string]any) {
				m["id"] = exp
				m["conditions"] = []any{cond("c1", "c", tc.control, 1), cond("c2", "v", 100-tc.control, 2)}
			}))
			if e.ID != exp {
				t.Fatalf("create replaced the id: %s", e.ID)
			}
			ts.setState(exp, "enrolling")
			got := ""
			for i := 0; i < 8; i++ {
				u := fmt.Sprintf("probe-ds-seed-u%d", i)
				ts.initUser(u, nil, nil)
				got += codeAt(t, ts.assign(u, "assign-prog"), "SelectSection", "absolute_value_plot_equality")
			}
			if got != tc.want {
				t.Errorf("conditions %s, want %s", got, tc.want)
			}
		})
	}
}
