// Package lazy holds values computed on their first use rather than at
// package init (docs/performance.md, "Start-up").
//
// A package-level `var x = sync.OnceValue(build)` is a call at init: every
// command pays a few allocations and the package gets an init of its own.
// `var x = &lazy.Value[T]{New: build}`, with build a function declared at
// top level, is laid out by the compiler: no init work at all.
//
// It must not hold anything but the value and how to build it.
package lazy
