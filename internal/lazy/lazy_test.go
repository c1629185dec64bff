package lazy

import (
	"sync"
	"testing"
)

func TestValueBuildsOnceOnFirstGet(t *testing.T) {
	calls := 0
	v := &Value[[]int]{New: func() []int { calls++; return []int{1, 2} }}
	if calls != 0 {
		t.Fatal("built before the first Get")
	}
	first := v.Get()
	if len(first) != 2 || &v.Get()[0] != &first[0] || calls != 1 {
		t.Fatalf("Get: %v after %d builds", first, calls)
	}
}

func TestValueConcurrentGet(t *testing.T) {
	var calls int
	var mu sync.Mutex
	v := &Value[*int]{New: func() *int { mu.Lock(); calls++; mu.Unlock(); return new(int) }}
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Go(func() { got[i] = v.Get() })
	}
	wg.Wait()
	for _, p := range got {
		if p != got[0] {
			t.Fatal("two values")
		}
	}
	if calls != 1 {
		t.Fatalf("%d builds", calls)
	}
}

// As sync.OnceValue: a panic of New is raised again at every Get.
func TestValuePanicRepeats(t *testing.T) {
	v := &Value[int]{New: func() int { panic("boom") }}
	for range 2 {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want boom", r)
				}
			}()
			v.Get()
		}()
	}
}
