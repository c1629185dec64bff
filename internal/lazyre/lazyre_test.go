package lazyre

import "testing"

func TestOfCompilesOnceOnFirstUse(t *testing.T) {
	re := Of(`^a+$`)
	if re.re != nil {
		t.Fatal("compiled before its first use")
	}
	first := re.Get()
	if !first.MatchString("aaa") || first.MatchString("ab") {
		t.Fatalf("%v does not match as ^a+$", first)
	}
	if re.Get() != first {
		t.Fatal("a second call compiled again")
	}
}

func TestOfInvalidPanicsOnGet(t *testing.T) {
	re := Of(`(`) // must not panic here
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid expression did not panic at its first use")
		}
	}()
	re.Get()
}

func TestOfConcurrentGet(t *testing.T) {
	re := Of(`x`)
	got := make(chan any, 8)
	for range 8 {
		go func() { got <- re.Get() }()
	}
	first := <-got
	for range 7 {
		if <-got != first {
			t.Fatal("two compilations")
		}
	}
}
