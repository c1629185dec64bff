package cmd

import (
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// configureOutput loads the output schema (flag or config) and turns the
// output node on when --conversational-outputs (or the config) asks for it.
// A broken schema is bad input (exit 2) even when the node stays off.
func configureOutput(a *pipeline.Agent, o *TurnOptions) error {
	if o.OutputSchema == "" {
		return nil
	}
	s, err := pipeline.LoadOutputSchema(o.OutputSchema)
	if err != nil {
		return &UsageError{Err: err}
	}
	a.Output = &pipeline.OutputConfig{Schema: s, Enabled: o.ConversationalOutputs}
	return nil
}
