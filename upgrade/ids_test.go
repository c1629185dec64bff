package upgrade

import "testing"

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !IsUUID(id) {
			t.Fatalf("NewID() = %q is not a UUID", id)
		}
		if id[14] != '4' || !(id[19] == '8' || id[19] == '9' || id[19] == 'a' || id[19] == 'b') {
			t.Fatalf("NewID() = %q is not version 4 / RFC variant", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestIsUUID(t *testing.T) {
	tests := map[string]bool{
		"0b7e5c2e-8d0a-4f57-9d6f-3c1a2b4c5d6e": true,
		"0B7E5C2E-8D0A-4F57-9D6F-3C1A2B4C5D6E": true,
		"0b7e5c2e8d0a4f579d6f3c1a2b4c5d6e":     false,
		"0b7e5c2e-8d0a-4f57-9d6f-3c1a2b4c5d6":  false,
		"0b7e5c2e-8d0a-4f57-9d6f_3c1a2b4c5d6e": false,
		"gb7e5c2e-8d0a-4f57-9d6f-3c1a2b4c5d6e": false,
		"math-hints":                           false,
		"":                                     false,
	}
	for in, want := range tests {
		if got := IsUUID(in); got != want {
			t.Errorf("IsUUID(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestIDFromIsStableAndUnique(t *testing.T) {
	a, b := IDFrom("effect-1"), IDFrom("effect-2")
	if a != IDFrom("effect-1") || a == b {
		t.Fatalf("IDFrom not a stable, distinct mapping: %s %s", a, b)
	}
	if !IsUUID(a) || a[14] != '4' {
		t.Fatalf("%s does not have the version-4 layout", a)
	}
}
