package pipeline

import (
	"context"
)

// OutputConfig configures the optional structured-output node.
type OutputConfig struct {
	Enabled bool
}

func (a *Agent) outputEnabled() bool { return false }

func (a *Agent) outputNode(_ context.Context, _ *turn) (string, error) { return nodeEnd, nil }
