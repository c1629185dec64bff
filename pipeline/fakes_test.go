package pipeline

import (
	"context"
	"net/http"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// unauthorized answers every experiment read with a 401.
type unauthorized struct{ *upgrade.Client }

func (u unauthorized) Experiments(context.Context) ([]upgrade.Experiment, error) {
	return nil, &upgrade.Error{Category: upgrade.CategoryAuth, Status: http.StatusUnauthorized, Method: "GET", URL: "/experiments", Message: "Unauthorized"}
}
