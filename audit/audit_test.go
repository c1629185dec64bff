package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSummarizeKeepsOnlyIdentifyingScalars(t *testing.T) {
	got := string(Summarize([]byte(`{"id":"e1","name":"Math Hints","state":"enrolling","conditions":[{"id":"c"}],"token":"sk-secret","description":"long text"}`)))
	if got != `{"id":"e1","name":"Math Hints","state":"enrolling"}` {
		t.Errorf("Summarize = %s", got)
	}
	for _, in := range []string{``, `[]`, `"x"`, `{"body":{"id":1}}`, `not json`} {
		if s := Summarize([]byte(in)); s != nil {
			t.Errorf("Summarize(%q) = %s, want nil", in, s)
		}
	}
}

func TestTargetOf(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"Math Hints","context":"x"}`:           "Math Hints",
		`{"experiment_id":"1b2c","status":"enrolling"}`: "1b2c",
		`{"name":"  ","experiment_id":"e"}`:             "e",
		`{"num_users":"30"}`:                            "",
		`null`:                                          "",
	} {
		if got := TargetOf([]byte(in)); got != want {
			t.Errorf("TargetOf(%s) = %q, want %q", in, got, want)
		}
	}
}

// Concurrent appends (as of several processes) each land as one whole line.
func TestFileLogConcurrentAppendsAndBadLine(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := OpenFileLog(dir, nil) // a handle each, as processes have
			if err := l.Append(Entry{Time: time.Now().UTC(), Event: Proposed, Actor: "a", SessionID: "s", Message: strings.Repeat("x", 3000+i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	l := OpenFileLog(dir, nil)
	es, err := l.Read(Filter{})
	if err != nil || len(es) != 40 {
		t.Fatalf("read %d entries, %v; want 40", len(es), err)
	}
	if st, err := os.Stat(l.Path()); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("trail file mode: %v %v", st, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("{torn\n")
	_ = f.Close()
	if _, err := l.Read(Filter{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), FileName+":41") {
		t.Errorf("a bad line: %v, want ErrCorrupt naming the file and line 41", err)
	}
}
