package sim

import (
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Mooclets (the ts_configurable algorithm, Thompson sampling) are switched
// off on a standard 6.5 backend. The real server refuses every use of them
// with a 400 (upgrade-results-designs.md section 10): an experiment that
// carries moocletPolicyParameters whatever its algorithm, and the reward
// routes. ts_configurable without the parameters fails validation first
// (validateExperiment).

// algorithmMooclet is the assignment algorithm that needs mooclets.
const algorithmMooclet = upgrade.AlgorithmMooclet

// moocletRefusal is the answer to a create or update body with
// moocletPolicyParameters (verb is "create" or "update"), nil without them.
func moocletRefusal(m map[string]any, verb string) *apiError {
	if v, ok := m["moocletPolicyParameters"]; absent(v, ok) {
		return nil
	}
	return &apiError{Status: 400, Name: "BadRequestError", Type: typeIncorrectParam,
		Message: fmt.Sprintf("Failed to %s Experiment: moocletPolicyParameters was provided but mooclets are not enabled on backend.", verb)}
}

// moocletsOff answers the rewards read (GET
// /experiments/mooclet-rewards/:id).
func moocletsOff(c *call) {
	c.fail(&apiError{Status: 400, Name: "BadRequestError", Type: typeIncorrectParam,
		Message: "Mooclets are not enabled on backend."})
}

// rewardOff answers POST /v6/reward: the user check of the client routes
// comes first (404 for an unknown user), then the mooclet switch.
func (s *Sim) rewardOff(c *call) {
	uid, ok := requireUser(c)
	if !ok {
		return
	}
	known := false
	if err := s.view(func() { known = s.st.Users[uid] != nil }); err != nil {
		c.failErr(err)
		return
	}
	if !known {
		c.fail(userNotDefined(uid))
		return
	}
	c.fail(&apiError{Status: 400, Name: "BadRequestError", Type: typeIncorrectParam,
		Message: "Failed to send reward: mooclet is not currently enabled on backend."})
}
