package cmd

import (
	"context"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// configureJobs gives the agent its job runner. Until the detached job
// runner exists, long actions run inline in the turn.
func configureJobs(_ *Factory, _ *pipeline.Agent, _ *checkpoint.FileStore) error { return nil }

func resumeJob(ctx context.Context, _ *Factory, env *turnEnv, sess *pipeline.Session, wait time.Duration) (*pipeline.Result, error) {
	return env.agent.ResumeJob(ctx, sess, wait)
}
