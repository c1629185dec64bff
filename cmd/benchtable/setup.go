package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// createExperiment makes a 50/50 experiment with one decision point through
// the registry, as a scenario setup does, and returns its id. Like the rest
// of this program it names no concrete action's params type.
func createExperiment(ctx context.Context, api actions.API, name, context, site, target string, codes [2]string) (string, error) {
	params, err := json.Marshal(map[string]any{
		"name": name, "context": context,
		"decision_points": []map[string]string{{"site": site, "target": target}},
		"conditions":      []map[string]any{{"code": codes[0], "weight": 50}, {"code": codes[1], "weight": 50}},
	})
	if err != nil {
		return "", err
	}
	b, err := actions.Bind("create_experiment", params)
	if err != nil {
		return "", err
	}
	out, err := b.Execute(ctx, actions.Env{API: api}, "")
	if err != nil {
		return "", fmt.Errorf("setup experiment %s: %w", name, err)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out.Result, &created); err != nil {
		return "", err
	}
	return created.ID, nil
}
