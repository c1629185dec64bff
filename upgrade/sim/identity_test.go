package sim

import (
	"path/filepath"
	"testing"
)

func TestIdentityIsKeptInTheDataFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sim", "data.json")
	a, err := New(Options{DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.StoredID(); err != nil || id != "" {
		t.Fatalf("fresh StoredID = %q, %v; want none", id, err)
	}
	id, err := a.Identity()
	if err != nil || len(id) != 16 {
		t.Fatalf("Identity = %q, %v", id, err)
	}
	if again, _ := a.Identity(); again != id {
		t.Errorf("second Identity = %q, want %q", again, id)
	}
	b, err := New(Options{DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.StoredID(); err != nil || got != id {
		t.Errorf("another process's StoredID = %q, %v; want %q", got, err, id)
	}
	other, err := New(Options{DataFile: filepath.Join(t.TempDir(), "data.json")})
	if err != nil {
		t.Fatal(err)
	}
	if oid, _ := other.Identity(); oid == id {
		t.Errorf("two simulators with different data share the id %q", id)
	}
}
