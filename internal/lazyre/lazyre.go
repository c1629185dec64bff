// Package lazyre compiles a regular expression the first time it is used
// rather than at package init: a command that never needs it pays nothing
// before main (docs/performance.md, "Start-up").
//
// It must not hold anything but the compiled expression.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr once, on its first call, and
// returns the same *regexp.Regexp on every call (safe for concurrent use).
// An invalid expr panics at that first call, as regexp.MustCompile does at
// init: the expressions are constants, and a test that uses one finds it.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
