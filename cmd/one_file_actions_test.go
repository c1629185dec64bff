package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Two actions that exist only in this file, about an object no built-in
// action knows (a note). Nothing else in the module names them: everything
// the agent does with them (the gatherer's prompt and tools in the note
// scope, validation, the confirmation, execution, the report, the job
// runner in a detached worker) comes from these two declarations, added to
// a set of actions of TestActionFromOneFile's own (oneFileActions): no
// other test sees them.

const (
	oneFileNote   actions.Name   = "one_file_note"
	oneFileSum    actions.Name   = "one_file_sum"
	oneFileObject actions.Object = "note"
)

// noteParams: write a note for a user, by initialising the user with the
// note as a group (one UpGrade call, counted by the test).
type noteParams struct {
	UserID string `json:"user_id" jsonschema:"the user the note is for"`
	Note   string `json:"note" jsonschema:"the note's text"`
	Times  int    `json:"times,omitempty" jsonschema:"how often the note is meant (1..5, default 1)"`
}

type noteResult struct {
	UserID string `json:"user_id"`
	Note   string `json:"note"`
	Times  int    `json:"times"`
}

// sumParams: add up 1..upto in a job, a batch at a time.
type sumParams struct {
	Upto int `json:"upto" jsonschema:"the last number to add (1..1000)"`
}

type sumTally struct {
	Done int `json:"done"`
	Sum  int `json:"sum"`
}

type sumResult struct {
	Upto    int `json:"upto"`
	Sum     int `json:"sum"`
	Batches int `json:"batches"` // batches this run did (a resumed run does fewer)
}

// oneFileActions is the built-in set plus the two actions of this file.
func oneFileActions() *actions.Registry {
	reg := actions.Builtin()
	actions.Add(reg, actions.Def[noteParams]{
		Name: oneFileNote, Order: 1000, Object: oneFileObject,
		Description: "Write a note for a user.",
		Note:        "writes a note for a user",
		Canonical: func(p noteParams) noteParams {
			p.UserID, p.Note = strings.TrimSpace(p.UserID), strings.TrimSpace(p.Note)
			if p.Times == 0 {
				p.Times = 1
			}
			return p
		},
		Validate: func(c *actions.Checker, p noteParams) error {
			if p.UserID == "" {
				c.Missing("user_id", "user_id is required")
			}
			if p.Note == "" {
				c.Missing("note", "note is required")
			}
			if p.Times < 1 || p.Times > 5 {
				c.AddValue("times", p.Times, "times must be between 1 and 5")
			}
			return nil
		},
		Plan: func(pl *actions.Planner, p noteParams) error {
			pl.Line("Write the note %q for user %q (meant %d times).", p.Note, p.UserID, p.Times)
			return nil
		},
		Execute: func(ctx context.Context, env actions.Env, p noteParams, _ string) (actions.Outcome, error) {
			if _, err := env.API.Init(ctx, p.UserID, upgrade.InitRequest{Group: map[string][]string{"note": {p.Note}}}); err != nil {
				return actions.Outcome{}, err
			}
			return actions.Result(noteResult(p))
		},
		Reconcile: func(context.Context, actions.Env, noteParams, string, time.Time) (actions.Reconciliation, error) {
			return actions.Reconciliation{Outcome: actions.OutcomeRepeat, Note: "writing the note again changes nothing"}, nil
		},
		Report: actions.ReportAs(func(r noteResult) string {
			return fmt.Sprintf("Wrote the note %q for user %q.", r.Note, r.UserID)
		}),
	})

	actions.Add(reg, actions.Def[sumParams]{
		Name: oneFileSum, Order: 1001, Object: oneFileObject,
		Description: "Add up the numbers 1..upto in a background job.",
		Note:        "a background job",
		Validate: func(c *actions.Checker, p sumParams) error {
			if p.Upto < 1 || p.Upto > 1000 {
				c.AddValue("upto", p.Upto, "upto must be between 1 and 1000")
			}
			return nil
		},
		Plan: func(pl *actions.Planner, p sumParams) error {
			pl.Line("Add up 1..%d in a background job.", p.Upto)
			return nil
		},
		Total: func(p sumParams) int { return p.Upto },
		Run: func(ctx context.Context, run actions.JobRun, p sumParams) (json.RawMessage, error) {
			var t sumTally
			if err := run.StartTally(&t); err != nil {
				return nil, err
			}
			size := run.BatchSize
			if size <= 0 {
				size = 7
			}
			batches := 0
			for t.Done < p.Upto {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				for i := 0; i < size && t.Done < p.Upto; i++ {
					t.Done++
					t.Sum += t.Done
				}
				batches++
				if err := run.CommitTally(t.Done, t); err != nil {
					return nil, err
				}
			}
			return json.Marshal(sumResult{Upto: p.Upto, Sum: t.Sum, Batches: batches})
		},
		Report: actions.ReportAs(func(r sumResult) string {
			return fmt.Sprintf("1 + ... + %d = %d.", r.Upto, r.Sum)
		}),
	})
	return reg
}

// oneFileActionsVar, set in the environment of TestActionFromOneFile, makes
// the test binary run as upgrade-agent (a job worker it spawns) with
// oneFileActions: the worker must know the job's action.
const oneFileActionsVar = "UPGRADE_AGENT_TEST_ONE_FILE_ACTIONS"

// childOptions are the options of the test binary running as
// upgrade-agent (TestMain).
func childOptions() []FactoryOption {
	if os.Getenv(oneFileActionsVar) == "1" {
		return []FactoryOption{WithActions(oneFileActions())}
	}
	return nil
}
