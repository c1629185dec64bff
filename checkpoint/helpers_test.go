package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files and the fuzz seed corpus")

const lockHelperEnv = "CHECKPOINT_TEST_LOCK_HELPER"

// TestMain doubles as the body of the subprocess that holds a lock (lock_test.go):
// the test binary re-executes itself with lockHelperEnv set.
func TestMain(m *testing.M) {
	if spec := os.Getenv(lockHelperEnv); spec != "" {
		os.Exit(lockHelper(spec))
	}
	os.Exit(m.Run())
}

// lockHelper locks the session named by spec ("<state-dir>\n<id>"), says so on
// stdout, and holds the lock until stdin closes.
func lockHelper(spec string) int {
	dir, id, _ := strings.Cut(spec, "\n")
	s, err := OpenFileStore(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	unlock, err := s.Lock(id)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	unlock()
	return 0
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// versionMember is how a file of the current format starts, after its "{".
var versionMember = fmt.Sprintf(`"format_version":%d,`, FormatVersion)

// fixedClock always returns at; stepClock advances one second per call, so the order
// of saves is the order of updated_at without any sleeping.
func fixedClock(at time.Time) func() time.Time { return func() time.Time { return at } }

func stepClock(start time.Time) func() time.Time {
	n := 0
	return func() time.Time {
		n++
		return start.Add(time.Duration(n) * time.Second)
	}
}

func newStore(t testing.TB) *FileStore {
	t.Helper()
	s, err := OpenFileStore(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	s.Now = stepClock(t0)
	return s
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sample is a checkpoint that uses every field of the format.
func sample(t testing.TB, id string) *Checkpoint {
	t.Helper()
	params := json.RawMessage(`{"name":"checkout <button> & color","context":"assign-prog","conditions":[{"code":"control","weight":50},{"code":"variant","weight":50}]}`)
	hash, err := ParamsHash("create_experiment", params)
	if err != nil {
		t.Fatal(err)
	}
	done := t0.Add(-time.Minute)
	return &Checkpoint{
		SessionID: id,
		CreatedAt: t0.Add(-time.Hour),
		Status:    StatusAwaitingConfirmation,
		NextNode:  "confirmation",
		Interrupt: &Interrupt{
			ID:        "int-1",
			Kind:      KindConfirmation,
			CreatedAt: t0.Add(-2 * time.Minute),
			Confirmation: &Confirmation{
				Action:            "create_experiment",
				Params:            params,
				ParamsHash:        hash,
				Message:           "Create experiment \"checkout <button> & color\" with 2 conditions?",
				Destructive:       false,
				ExperimentID:      "exp-42",
				ExperimentVersion: "2026-01-01T00:00:00.000Z",
			},
		},
		Counters: Counters{ConsecutiveAutoReplies: 1, Turns: 3},
		Usage:    Usage{LLMCalls: 7, PromptTokens: 5400, CompletionTokens: 610, CachedTokens: 2048},
		Summary:  &SessionSummary{LastMessage: "create an experiment for the checkout button", Turns: 3},
		MCP:      json.RawMessage(`{"servers":{"jobs":{"com.upgrade-agent/job":{"version":1}}}}`),
		Effects: []Effect{
			{EffectID: "eff-1", Action: "update_experiment_status", ParamsHash: "ab12", State: EffectDone,
				Result: json.RawMessage(`{"id":"exp-41","state":"enrolling"}`), StartedAt: t0.Add(-90 * time.Second), FinishedAt: &done},
			{EffectID: "eff-2", Action: "delete_experiment", ParamsHash: "cd34", State: EffectFailed,
				Error: "not_found: no experiment exp-40", StartedAt: t0.Add(-80 * time.Second), FinishedAt: &done},
		},
		State: json.RawMessage(`{"user_input":"yes","conversation_history":[{"user":"hello","assistant":"Hi! How can I help?","at":"2026-01-02T02:00:00Z"}],"current_state":"CONFIRMING","errors":{}}`),
	}
}

// reseal recomputes the checksum of a file whose last member is a checksum, so a test
// can change the content and still get past the checksum to the next check.
func reseal(data []byte) []byte {
	i := bytes.LastIndex(data, []byte(checksumKey))
	if i < 0 {
		return data
	}
	body := append(append([]byte{}, data[:i+len(checksumKey)]...), checksumTail...)
	sum := sha256.Sum256(body)
	out := append([]byte{}, data[:i+len(checksumKey)]...)
	out = append(out, hex.EncodeToString(sum[:])...)
	out = append(out, checksumTail...)
	return append(out, '\n')
}

// sealMap encodes a generic document with checksum as its last member.
func sealMap(t testing.TB, m map[string]any) []byte {
	t.Helper()
	delete(m, "checksum")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b[:len(b)-1], []byte(`,"checksum":""}`)...)
	return reseal(b)
}

// writeSession puts raw bytes where the store expects the session's checkpoint.
func writeSession(t testing.TB, s *FileStore, id string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(s.Dir(), id), 0o700); err != nil {
		t.Fatal(err)
	}
	p := s.Path(id)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// longState is a session state of the given number of exchanges (about 200 bytes of
// user and assistant text each) plus an execution log, shaped like pipeline.md's.
func longState(t testing.TB, turns, logEntries int) json.RawMessage {
	t.Helper()
	type exchange struct {
		User      string `json:"user"`
		Assistant string `json:"assistant"`
		At        string `json:"at"`
	}
	type logEntry struct {
		Timestamp string         `json:"timestamp"`
		Action    string         `json:"action"`
		Params    map[string]any `json:"params"`
		Status    string         `json:"status"`
		Result    map[string]any `json:"result"`
	}
	st := struct {
		UserInput           string     `json:"user_input"`
		ConversationHistory []exchange `json:"conversation_history"`
		CurrentState        string     `json:"current_state"`
		ExecutionLog        []logEntry `json:"execution_log"`
		GatheredInfo        any        `json:"gathered_info"`
	}{UserInput: "show me the experiments", CurrentState: "RESPONDING", GatheredInfo: map[string]any{}}
	for i := range turns {
		at := t0.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		st.ConversationHistory = append(st.ConversationHistory, exchange{
			User:      fmt.Sprintf("turn %d: what is the enrollment of experiment number %d so far?", i, i%37),
			Assistant: fmt.Sprintf("Experiment %d has 1,204 users enrolled: control 601 (49.9%%), variant 603 (50.1%%). Turn %d.", i%37, i),
			At:        at,
		})
	}
	for i := range logEntries {
		st.ExecutionLog = append(st.ExecutionLog, logEntry{
			Timestamp: t0.Add(time.Duration(i) * time.Minute).Format(time.RFC3339),
			Action:    "update_experiment_status",
			Params:    map[string]any{"experiment_id": fmt.Sprintf("b3c1f2a0-%04d-4e1f-9a2b-0c1d2e3f4a5b", i), "status": "enrolling"},
			Status:    "success",
			Result:    map[string]any{"id": fmt.Sprintf("b3c1f2a0-%04d-4e1f-9a2b-0c1d2e3f4a5b", i), "state": "enrolling", "name": fmt.Sprintf("experiment %d", i)},
		})
	}
	return mustJSON(t, st)
}

func checksumHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// scratchDir is a temporary folder on tmpfs when /dev/shm is usable (fuzzing and the
// fsync-free benchmarks), else an ordinary test temp dir.
func scratchDir(tb testing.TB) string {
	tb.Helper()
	if d, err := os.MkdirTemp("/dev/shm", "checkpoint-test-"); err == nil {
		tb.Cleanup(func() { _ = os.RemoveAll(d) })
		return d
	}
	return tb.TempDir()
}

// hookOpen sets testHookOpen for the test.
func hookOpen(t *testing.T, f func(path string)) {
	t.Helper()
	testHookOpen = f
	t.Cleanup(func() { testHookOpen = nil })
}

// fileOf returns the bytes Save would write for sample(id) at seq 1, after mutate,
// without the checks Save makes: files a damaged or hostile writer could produce.
func fileOf(tb testing.TB, id string, mutate func(cp *Checkpoint)) []byte {
	tb.Helper()
	cp := sample(tb, id)
	cp.FormatVersion, cp.Seq, cp.ParentSeq, cp.UpdatedAt = FormatVersion, 1, 0, t0
	if mutate != nil {
		mutate(cp)
	}
	data, _, err := encode(cp)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// wantCorrupt checks that err is a *CorruptError naming path whose reason says reason.
func wantCorrupt(t *testing.T, what string, err error, path, reason string) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("%s: got %v, want a CorruptError naming %s", what, err, path)
	}
	if !strings.Contains(ce.Reason, reason) {
		t.Errorf("%s: reason %q, want %q", what, ce.Reason, reason)
	}
}
