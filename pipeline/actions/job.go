package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// jobBuiltin is a registered action declared with Total and Run: Execute
// starts its job (or re-attaches to it) under an id derived from the
// approved confirmation, and Poll and Fetch ask the job runner about it.
type jobBuiltin[P any] struct {
	*builtin[P]
}

var _ JobAction = jobBuiltin[struct{}]{}

// JobID is the id of the job of an approved confirmation's key.
func JobID(key string) string {
	if key == "" {
		return upgrade.NewID()
	}
	return key
}

func (a *builtin[P]) startJob(ctx context.Context, env Env, b *Bound, p P, key string) (Outcome, error) {
	if env.Jobs == nil {
		// Without a job runner (library use, tests) it runs in the turn.
		run := JobRun{API: env.API, Key: "inline-" + upgrade.NewID()[:8]}
		res, err := a.def.Run(ctx, run, p)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Result: res}, nil
	}
	id := JobID(key)
	if err := env.Jobs.Start(ctx, id, env.SessionID, a.spec.Name, b.Params); err != nil {
		return Outcome{}, fmt.Errorf("starting job %s: %w", id, err)
	}
	return Outcome{Job: &JobRef{ID: id}}, nil
}

func (a jobBuiltin[P]) Poll(ctx context.Context, env Env, ref JobRef, wait time.Duration) (JobStatus, error) {
	if env.Jobs == nil {
		return JobStatus{}, errors.New("no job runner to ask about job " + ref.ID)
	}
	st, err := env.Jobs.Wait(ctx, ref.ID, wait)
	if err != nil {
		return st, err
	}
	if st.Action == "" {
		st.Action = a.spec.Name
	}
	return st, nil
}

func (jobBuiltin[P]) Fetch(_ context.Context, _ Env, _ JobRef, st JobStatus) (json.RawMessage, error) {
	if st.State != JobSucceeded {
		return nil, &JobError{Status: st}
	}
	return st.Result, nil
}

// job is the body of bound params, for a job runner.
func (a jobBuiltin[P]) job(b *Bound) (Job, bool) {
	p, err := a.typed(b)
	if err != nil {
		return nil, false
	}
	return boundJob[P]{def: &a.def, p: p}, true
}

type boundJob[P any] struct {
	def *Def[P]
	p   P
}

func (j boundJob[P]) Total() int { return j.def.Total(j.p) }

func (j boundJob[P]) Run(ctx context.Context, run JobRun) (json.RawMessage, error) {
	return j.def.Run(ctx, run, j.p)
}

// Job returns the job body of params bound to a long-running action;
// false for any other action (an MCP tool, or one that is no job).
func (b *Bound) Job() (Job, bool) {
	j, ok := b.act.(interface{ job(*Bound) (Job, bool) })
	if !ok {
		return nil, false
	}
	return j.job(b)
}
