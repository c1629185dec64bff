package inittrace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	out := []byte("init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"init runtime @0.71 ms, 0.23 ms clock, 0 bytes, 0 allocs\n" +
		"something else on stderr\n" +
		"init github.com/x/y @25 ms, 7.1 ms clock, 1049848 bytes, 6104 allocs\n")
	got := Parse(out)
	want := []Init{{"internal/bytealg", 0}, {"runtime", 0.23}, {"github.com/x/y", 7.1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Parse (-want +got):\n%s", diff)
	}
	if s := Sum(got); s < 7.329 || s > 7.331 {
		t.Fatalf("Sum = %v, want 7.33", s)
	}
	r := Report{Best: got}
	if w := r.Without("github.com/x/y"); w < 0.229 || w > 0.231 {
		t.Fatalf("Without = %v, want 0.23", w)
	}
}
