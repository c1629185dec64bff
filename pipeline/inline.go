package pipeline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// runLongInline runs a long action in the turn itself, for callers without a
// job runner (tests, the library API).
func runLongInline(ctx context.Context, api actions.API, p actions.Params, jobID string) (json.RawMessage, error) {
	var bp actions.BalanceParams
	switch v := p.(type) {
	case actions.BalanceParams:
		bp = v
	case *actions.BalanceParams:
		bp = *v
	default:
		return nil, fmt.Errorf("%s cannot run inline", p.Action())
	}
	tally, err := actions.RunBalance(ctx, api, bp, actions.BalanceTally{}, actions.BalanceOptions{UserPrefix: "balance-" + jobID + "-"})
	if err != nil {
		return nil, err
	}
	res, err := actions.SummarizeBalance(ctx, api, bp, tally)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
