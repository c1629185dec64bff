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

import "sync"

// Value is a T built by New on the first Get.
type Value[T any] struct {
	// New builds the value; it is called once.
	New func() T

	once  sync.Once
	v     T
	valid bool
	p     any
}

// Get builds the value on its first call and returns it on every call
// (safe for concurrent use). A panic in New is re-raised at every Get,
// as sync.OnceValue does.
func (l *Value[T]) Get() T {
	l.once.Do(l.build)
	if !l.valid {
		panic(l.p)
	}
	return l.v
}

func (l *Value[T]) build() {
	defer func() {
		l.p = recover()
		if !l.valid {
			panic(l.p)
		}
	}()
	l.v = l.New()
	l.valid = true
}
