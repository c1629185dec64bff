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
