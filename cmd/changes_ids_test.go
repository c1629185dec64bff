package cmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"24h":                  now.Add(-24 * time.Hour),
		" 90m ":                now.Add(-90 * time.Minute),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"1.5d":                 now.Add(-36 * time.Hour),
		"2 h":                  now.Add(-2 * time.Hour),
		"2h ago":               now.Add(-2 * time.Hour),
		"3D AGO":               now.Add(-72 * time.Hour),
		"2026-05-01T10:00:00Z": time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC),
		"2026-05-01":           time.Date(2026, 5, 1, 0, 0, 0, 0, time.Local),
		"2026-05-01 14:30":     time.Date(2026, 5, 1, 14, 30, 0, 0, time.Local),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, text := range map[string]string{
		"yesterday":  "want a duration (24h, 90m, 7d) or a time",
		"24":         "want a duration",
		"-5h":        "cannot be negative",
		"-2d":        "cannot be negative",
		"2099-01-01": "in the future",
		"5x":         "want a duration",
		"NaNd":       "want a duration",
		"1e300d":     "want a duration",
	} {
		_, err := parseSince(in, now)
		var fe *FlagError
		if err == nil || !asFlagError(err, &fe) || !strings.Contains(err.Error(), `--since "`) || !strings.Contains(err.Error(), text) {
			t.Errorf("parseSince(%q): %v, want a flag error naming --since with %q", in, err, text)
			continue
		}
		if ExitCode(err) != exitcode.Usage {
			t.Errorf("parseSince(%q): exit %d, want %d", in, ExitCode(err), exitcode.Usage)
		}
	}
}

func asFlagError(err error, fe **FlagError) bool {
	f, ok := err.(*FlagError)
	*fe = f
	return ok
}

// writeChanges stores a session whose state holds the changes given, as a
// finished turn leaves them.
func writeChanges(t *testing.T, stateDir, session string, cs []actions.Change) {
	t.Helper()
	store, err := checkpoint.OpenFileStore(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	state, err := json.Marshal(map[string]any{"changes": cs})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(&checkpoint.Checkpoint{SessionID: session, Status: checkpoint.StatusIdle, State: state}); err != nil {
		t.Fatal(err)
	}
}

// An id prefix that starts several change ids is refused, exit 2, with
// the candidates listed; more of the id picks one.
func TestAmbiguousChangePrefix(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	writeChanges(t, state, "s1", []actions.Change{
		{ID: "5e1d07a2c9b3", SessionID: "s1", Action: "update_feature_flag_status", ExecutedAt: at, Undoable: true,
			Target: actions.Target{Kind: "feature_flag", ID: "f1", Name: "Dark mode"}},
		{ID: "5e1f99000000", SessionID: "s1", Action: "update_experiment", ExecutedAt: at.Add(time.Minute), Undoable: true,
			Target: actions.Target{Kind: "experiment", ID: "e1", Name: "Math Hints"}},
		{ID: "7a0000000000", SessionID: "s1", Action: "create_feature_flag", ExecutedAt: at.Add(-time.Minute), Undoable: true,
			Target: actions.Target{Kind: "feature_flag", ID: "f1", Name: "Dark mode"}},
	})
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "OPENAI_API_KEY=", "OPENAI_BASE_URL=")
	for _, args := range [][]string{{"undo", "5e1"}, {"changes", "show", "5e1"}, {"undo", " 5e "}} {
		code, out, errOut := agentIn(t, env, args...)
		if code != exitcode.Usage {
			t.Errorf("%v: exit %d, want %d\n%s\n%s", args, code, exitcode.Usage, out, errOut)
		}
		for _, want := range []string{"is ambiguous: it starts 2 change ids", "5e1d07a2c9b3", "update_feature_flag_status Dark mode", "5e1f99000000", "update_experiment Math Hints"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, errOut)
			}
		}
		if strings.Contains(errOut, "7a0000000000") {
			t.Errorf("%v: stderr lists a change the prefix does not start:\n%s", args, errOut)
		}
	}
	if code, out, errOut := agentIn(t, env, "changes", "show", "5e1f", "-o", "json"); code != 0 || !strings.Contains(out, `"id": "5e1f99000000"`) {
		t.Errorf("show 5e1f: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut := agentIn(t, env, "changes", "list", "--since", "-3h")
	if code != exitcode.Usage || !strings.Contains(errOut, `--since "-3h"`) {
		t.Errorf("list --since -3h: exit %d\n%s", code, errOut)
	}
}
