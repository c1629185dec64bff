package pipeline

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// recorder is an Auditor that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (r *recorder) Audit(e audit.Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, e)
}

func (r *recorder) events() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, e := range r.entries {
		names = append(names, e.Event)
	}
	return strings.Join(names, ",")
}

func (r *recorder) last(event string) audit.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.entries) - 1; i >= 0; i-- {
		if r.entries[i].Event == event {
			return r.entries[i]
		}
	}
	return audit.Entry{}
}

// answerPath is one way a person's answer reaches a pending confirmation.
type answerPath struct {
	name string
	by   string // who the approved entry names
	run  func(h *harness) (*Result, error)
}

// approvals: every way a yes reaches the confirmation (ask --session ID
// yes, resume --answer yes, --yes on resume, --yes on a message).
var approvals = []answerPath{
	{"ask yes", "human", func(h *harness) (*Result, error) { return h.tryAsk("yes", text("Deleted.")) }},
	{"resume --answer yes", "human", func(h *harness) (*Result, error) {
		h.llm.Enqueue(text("Deleted."))
		return h.agent.Resume(context.Background(), h.sess, ResumeRequest{Answer: "yes", HasAnswer: true})
	}},
	{"decide (flag)", "yes-flag", func(h *harness) (*Result, error) {
		h.llm.Enqueue(text("Deleted."))
		return h.agent.Run(context.Background(), h.sess, Decision{ConfirmationID: h.sess.PendingConfirmation(), Approve: true})
	}},
	{"resume --yes", "yes-flag", func(h *harness) (*Result, error) {
		h.agent.set.Yes = true
		h.llm.Enqueue(text("Deleted."))
		return h.agent.Resume(context.Background(), h.sess, ResumeRequest{})
	}},
	{"ask --yes with a message", "yes-flag", func(h *harness) (*Result, error) {
		h.agent.set.Yes = true
		return h.tryAsk("go on then", text("Deleted."))
	}},
}

func auditHarness(t *testing.T) (*harness, *recorder, upgrade.Experiment) {
	h := newHarness(t)
	rec := &recorder{}
	h.agent.auditor = rec
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	if res := proposeDelete(h, e.ID, nil); res.Status != StatusAwaitingConfirmation {
		t.Fatalf("proposal: %+v", res)
	}
	return h, rec, e
}

// Every path of a yes records the approval and the write, naming the
// confirmation and the experiment.
func TestAuditEveryApprovalPath(t *testing.T) {
	for _, p := range approvals {
		t.Run(p.name, func(t *testing.T) {
			h, rec, _ := auditHarness(t)
			proposed := rec.last(audit.Proposed)
			res, err := p.run(h)
			if err != nil || res.Status != StatusCompleted || len(h.experimentNames()) != 0 {
				t.Fatalf("got %+v, %v", res, err)
			}
			if got := rec.events(); got != "proposed,approved,executed" {
				t.Fatalf("events %s, want proposed,approved,executed", got)
			}
			ap, ex := rec.last(audit.Approved), rec.last(audit.Executed)
			if ap.Message != "by "+p.by || ap.ConfirmationID != proposed.ConfirmationID || ex.ConfirmationID != proposed.ConfirmationID {
				t.Errorf("approved %+v executed %+v, want by %s under %s", ap, ex, p.by, proposed.ConfirmationID)
			}
			if ex.Outcome != audit.OutcomeSuccess || ex.Target != "Math Hints" || ex.Action != "delete_experiment" || !ex.Destructive {
				t.Errorf("executed entry %+v", ex)
			}
		})
	}
}

// A no, as a word, an answer to resume, or free text the analyzer reads,
// records the denial.
func TestAuditEveryDenialPath(t *testing.T) {
	for _, p := range []answerPath{
		{"ask no", "", func(h *harness) (*Result, error) { return h.tryAsk("no", text("Nothing deleted.")) }},
		{"resume --answer no", "", func(h *harness) (*Result, error) {
			h.llm.Enqueue(text("Nothing deleted."))
			return h.agent.Resume(context.Background(), h.sess, ResumeRequest{Answer: "no", HasAnswer: true})
		}},
		{"free text", "", func(h *harness) (*Result, error) {
			return h.tryAsk("actually I changed my mind about deleting it",
				analyze(IntentNeedsInfo, "refuses the delete", map[string]any{"user_confirmed": false}),
				text("Cancelled: Math Hints stays."))
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			h, rec, _ := auditHarness(t)
			res, err := p.run(h)
			if err != nil || res.Status != StatusCompleted || len(h.experimentNames()) != 1 {
				t.Fatalf("got %+v, %v", res, err)
			}
			if got := rec.events(); got != "proposed,denied" {
				t.Fatalf("events %s, want proposed,denied", got)
			}
			if d := rec.last(audit.Denied); d.ConfirmationID != rec.last(audit.Proposed).ConfirmationID || d.Target != "Math Hints" {
				t.Errorf("denied entry %+v", d)
			}
		})
	}
}

// Under the confirm-never policy with --yes nobody is asked: the
// approval names the flag, and the write is recorded.
func TestAuditPolicyNever(t *testing.T) {
	h := newHarness(t)
	rec := &recorder{}
	h.agent.auditor = rec
	h.agent.set.Policy, h.agent.set.Yes = PolicyNever, true
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	res := proposeDelete(h, e.ID, nil)
	if res.Status != StatusCompleted || len(h.experimentNames()) != 0 {
		t.Fatalf("got %+v", res)
	}
	if got := rec.events(); got != "approved,executed" {
		t.Fatalf("events %s, want approved,executed", got)
	}
	if ap := rec.last(audit.Approved); ap.Message != "by yes-flag" || ap.Target != "Math Hints" {
		t.Errorf("approved entry %+v", ap)
	}
}

// An expired confirmation is never executed, whichever way the yes comes:
// it is planned again under a new id and asked again, saying why; within
// the ttl the new one runs once.
func TestAuditExpiryOnEveryApprovalPath(t *testing.T) {
	for _, p := range approvals {
		t.Run(p.name, func(t *testing.T) {
			h, rec, _ := auditHarness(t)
			h.agent.set.ApprovalTTL = time.Hour
			h.agent.deps.Now = func() time.Time { return fixedNow().Add(2 * time.Hour) }
			res, err := p.run(h)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusAwaitingConfirmation || len(h.experimentNames()) != 1 || len(res.Actions) != 0 {
				t.Fatalf("an expired confirmation ran or was not asked again: %+v", res)
			}
			if !strings.Contains(res.Response, "expired") || res.Confirmation == nil {
				t.Errorf("the reply does not say the confirmation expired: %q", res.Response)
			}
			if strings.Contains(res.Response, "clear yes or no") {
				t.Errorf("a clear yes to an expired confirmation is asked to be clearer: %q", res.Response)
			}
			if got := rec.events(); got != "proposed,expired,proposed" {
				t.Fatalf("events %s, want proposed,expired,proposed", got)
			}
			old, renewed := rec.entries[0].ConfirmationID, rec.entries[2].ConfirmationID
			if rec.entries[1].ConfirmationID != old || renewed == old || res.Confirmation.ID != renewed {
				t.Errorf("entries %+v, shown %s", rec.entries, res.Confirmation.ID)
			}
			h.agent.set.Yes = false
			if res := h.ask("yes", text("Deleted.")); res.Status != StatusCompleted || len(h.experimentNames()) != 0 {
				t.Fatalf("the renewed confirmation within the ttl: %+v", res)
			}
			if ex := rec.last(audit.Executed); ex.ConfirmationID != renewed || ex.Outcome != audit.OutcomeSuccess {
				t.Errorf("executed entry %+v, want under %s", ex, renewed)
			}
		})
	}
}
