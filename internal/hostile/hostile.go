// Package hostile builds hostile input for tests and fuzz seeds: alias
// bombs ("billion laughs"), documents past a size limit, named pipes that
// nobody writes to, and a guard that turns a hang into a failure. Only
// tests import it.
package hostile

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// AliasBomb is a YAML flow mapping of levels+1 lists, each holding width
// aliases of the list before: {l0: &l0 [lol], l1: &l1 [*l0, *l0, ...], ...}.
// It fits on one line, so it can stand as the value of any key, and
// expands to width^levels strings. AliasBomb(9, 9), 510 bytes, expands to
// 387,420,489 strings, the shape of the bomb of issue 15.7; AliasBomb(6, 9)
// expands to 531,441, past the 262,144 values internal/safeyaml allows yet
// cheap enough to expand that a test of unguarded code fails instead of
// exhausting the machine.
func AliasBomb(levels, width int) string {
	parts := []string{"l0: &l0 [lol]"}
	for i := 1; i <= levels; i++ {
		items := make([]string, width)
		for j := range items {
			items[j] = fmt.Sprintf("*l%d", i-1)
		}
		parts = append(parts, fmt.Sprintf("l%d: &l%d [%s]", i, i, strings.Join(items, ", ")))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Huge is a YAML list of one-character strings, at least n bytes long.
func Huge(n int) string {
	return strings.Repeat("- x\n", n/4+1)
}

// Within runs fn and fails the test when it has not returned after d: a
// reader that blocks on a pipe or expands a bomb would otherwise hang the
// test run instead of failing it.
func Within(t testing.TB, d time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still running after %v", d)
		return nil
	}
}
