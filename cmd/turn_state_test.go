//go:build unix

package cmd

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// Cached server data goes once an action could have changed it
// (Spec.Invalidates): enrollment figures the gatherer read before a
// balance job are gone from the session once the job's result is
// recorded, so nothing later reads the old counts as current.
func TestEnrollmentCacheInvalidatedByJob(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	_, tp, c := simTap(t, 3)
	expID := createBalanceExperiment(t, c)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+tp.URL()+"/api")
	ask := writeTestFile(t, dir, "ask.yaml", fmt.Sprintf(`- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: enrollment then a balance test, reasoning: read then simulate}
- call:
    get_enrollment_details: {experiment_id: %q}
- call:
    set_action_needed: {action: test_condition_balance, reasoning: asked}
    set_action_params: {action_params: {num_users: 30, context: mathstream, site: lesson-stream, target: question-hint, experiment_id: %q}}
`, expID, expID))
	done := writeTestFile(t, dir, "done.yaml", "- reply: Done.\n")

	code, o, e := agentIn(t, env, "ask", "--yes", "--wait-jobs", "0", "--llm", "script:"+ask, "how many are enrolled? then simulate 30 students")
	if code != 11 {
		t.Fatalf("ask: exit %d, want 11\n%s\n%s", code, o, e)
	}
	id := latestSession(t, state)
	stopWorkerAtEnd(t, state, jobOf(t, state))
	if _, ok := loadCheckpoint(t, state, id).State.GatheredInfo["enrollment_details"]; !ok {
		t.Fatalf("the gatherer's enrollment figures are not in the session: the test does not start where it should")
	}
	if code, o, e := agentIn(t, env, "resume", id, "--wait", "--timeout", "2m", "--llm", "script:"+done); code != 0 {
		t.Fatalf("resume --wait: exit %d\n%s\n%s", code, o, e)
	}
	if v, ok := loadCheckpoint(t, state, id).State.GatheredInfo["enrollment_details"]; ok {
		t.Errorf("enrollment figures from before the job are still cached after it: %v", v)
	}
}

// A turn that fails keeps its message for `resume` to run again, as it
// was after the hooks: redacted. The secret is in no file of the state
// dir, and resume does not echo it.
func TestFailedTurnStoresTheRedactedMessage(t *testing.T) {
	const token = "tok-SECRET-retry-0123456789"
	const key = "sk-SECRETretry0123456789abcdef"
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_TOKEN="+token)
	fail := writeTestFile(t, dir, "fail.yaml", "- fault: {status: 401}\n")
	ok := writeTestFile(t, dir, "ok.yaml", `- messages_contain: ["[REDACTED]"]
  call:
    analyze_user_request: {intent_type: direct_answer, confidence: 0.9, user_request_summary: greeting, reasoning: hello, direct_response: Hello.}
`)
	msg := fmt.Sprintf("hello, my token is %s and my key is %s", token, key)
	code, o, e := agentIn(t, env, "ask", "--llm", "script:"+fail, msg)
	if code == 0 || code == 10 {
		t.Fatalf("ask with a failing LLM: exit %d\n%s\n%s", code, o, e)
	}
	id := latestSession(t, state)
	retry := loadCheckpoint(t, state, id).State.RetryInput
	if retry == "" || strings.Contains(retry, token) || strings.Contains(retry, key) || !strings.Contains(retry, "[REDACTED]") {
		t.Errorf("retry_input %q: want the message with its secrets redacted", retry)
	}

	code, o, e = agentIn(t, env, "resume", id, "--llm", "script:"+ok)
	if code != 0 || !strings.Contains(o, "Hello.") {
		t.Fatalf("resume of the failed turn: exit %d\n%s\n%s", code, o, e)
	}
	if !strings.Contains(e, "retrying the failed turn: hello, my token is [REDACTED]") || strings.Contains(o+e, token) || strings.Contains(o+e, key) {
		t.Errorf("resume's output: %s\n%s", o, e)
	}
	checkNoSecrets(t, state, token, key)
}

// Issue 15, finding 10: UpGrade answering 200 with an empty body where a
// list is due is a broken answer, not an empty list: `experiments list`
// fails (exit 1) and says so, and never prints "no experiments".
func TestEmptyAnswerIsNotAnEmptyList(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hs.Close)
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+filepath.Join(t.TempDir(), "state"), "UPGRADE_API_URL="+hs.URL+"/api")
	for _, args := range [][]string{{"experiments", "list"}, {"experiments", "list", "-o", "json"}} {
		code, o, e := agentIn(t, env, args...)
		if code != 1 || strings.Contains(o+e, "no experiments") || strings.TrimSpace(o) == "[]" || !strings.Contains(strings.ToLower(e), "empty") {
			t.Errorf("%v against an UpGrade answering 200 with no body: exit %d (want 1, naming the empty answer)\n%s\n%s", args, code, o, e)
		}
	}
}
