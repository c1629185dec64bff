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

// RE is a regular expression compiled on its first use.
type RE struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// Of returns expr to be compiled on the first Get. A package-level
// `var x = lazyre.Of("...")` costs no init at all: the compiler inlines Of
// and lays the value out in the binary, so the package has no init work
// for it (quality.TestOwnPackagesHaveNoInit checks this).
func Of(expr string) *RE { return &RE{expr: expr} }

// Get compiles the expression on its first call and returns the same
// *regexp.Regexp on every call (safe for concurrent use). An invalid
// expression panics there, as regexp.MustCompile does.
func (r *RE) Get() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}
