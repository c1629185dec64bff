package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveRecordsTheServerOnce(t *testing.T) {
	s := newStore(t)
	s.Server = "http://a.example/api"
	cp := sample(t, "0123456789ab")
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(cp.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if got.UpgradeServer != "http://a.example/api" {
		t.Fatalf("upgrade_server = %q after the first save", got.UpgradeServer)
	}
	// Another process with another server keeps what was recorded.
	s.Server = "embedded-simulator:00ff"
	if err := s.Save(got); err != nil {
		t.Fatal(err)
	}
	again, err := s.Load(cp.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if again.UpgradeServer != "http://a.example/api" {
		t.Errorf("upgrade_server = %q, want the first server kept", again.UpgradeServer)
	}
	// LoadFile reads it from a file outside any store.
	out := filepath.Join(t.TempDir(), "artifact.json")
	data, err := os.ReadFile(s.Path(cp.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := LoadFile(out)
	if err != nil || fromFile.UpgradeServer != "http://a.example/api" {
		t.Errorf("LoadFile = %v, %v", fromFile, err)
	}
	// And Latest's header reader accepts the member.
	if id, err := s.Latest(StatusAwaitingConfirmation); err != nil || id != cp.SessionID {
		t.Errorf("Latest = %q, %v", id, err)
	}
}

func TestCheckpointWithoutServerLoads(t *testing.T) {
	s := newStore(t)
	cp := sample(t, "0123456789ac")
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.Path(cp.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "upgrade_server") {
		t.Fatalf("a store without Server wrote upgrade_server")
	}
	if _, err := s.Load(cp.SessionID); err != nil {
		t.Fatal(err)
	}
}
