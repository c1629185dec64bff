package textdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"status", "stauts", 2},
		{"kitten", "sitting", 3},
		{"héllo", "hello", 1}, // runes, not bytes
		{"same", "same", 0},
	} {
		if got := Levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := Levenshtein(tt.b, tt.a); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d (symmetry)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"name", "steps", "seed", "setup"}
	for s, want := range map[string]string{
		"step":    "steps",
		"nmae":    "name",
		"options": "",
		"sed":     "seed",
	} {
		if got := Closest(s, known, 3); got != want {
			t.Errorf("Closest(%q) = %q, want %q", s, got, want)
		}
	}
}
