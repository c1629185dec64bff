package plainjson

import "testing"

func TestMarshalKeepsHTMLCharacters(t *testing.T) {
	got, err := Marshal(map[string]string{"q": "a<b && c>d"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"q":"a<b && c>d"}`; string(got) != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("a func was encoded")
	}
}
