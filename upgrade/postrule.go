package upgrade

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// A 6.5 server stores every new experiment with the post-experiment rule
// "continue", whatever the create asked for, and keeps the revertTo it was
// sent although it replaced the condition ids, so that revertTo names no
// condition. The rule and revertTo only hold after a PUT that names the
// server's own condition id. HoldsPostRule and SetPostRule are the pieces
// for that: create, check, and if needed PUT and read back.

// HoldsPostRule reports whether e, as a server returned it, holds the post
// rule asked for: the same rule and, for the assign rule, revertTo naming
// the condition whose code is revertToCode ("" = the default, revertTo
// null). For the other rules revertTo must be null.
func (e *Experiment) HoldsPostRule(rule, revertToCode string) bool {
	if e == nil || e.PostExperimentRule != rule {
		return false
	}
	if rule != PostRuleAssign || revertToCode == "" {
		return e.RevertTo == nil
	}
	if e.RevertTo == nil {
		return false
	}
	c := e.ConditionByID(*e.RevertTo)
	return c != nil && c.ConditionCode == revertToCode
}

// WithPostRule sets the post rule of e and points revertTo at the condition
// whose code is revertToCode in e itself (so e must carry the server's
// condition ids). It fails with a validation error when the code names no
// condition of e, or when a code is given with another rule than assign.
func (e *Experiment) WithPostRule(rule, revertToCode string) error {
	if err := checkPostRule(rule, revertToCode); err != nil {
		return err
	}
	var revertTo *string
	if revertToCode != "" {
		c := e.ConditionByCode(revertToCode)
		if c == nil {
			return &Error{Category: CategoryValidation,
				Message: fmt.Sprintf("experiment %s has no condition %q to revert to", e.ID, revertToCode)}
		}
		id := c.ID
		revertTo = &id
	}
	e.PostExperimentRule = rule
	e.RevertTo = revertTo
	return nil
}

func checkPostRule(rule, revertToCode string) *Error {
	switch rule {
	case PostRuleContinue, PostRuleRevert, PostRuleAssign:
	default:
		return &Error{Category: CategoryValidation, Message: fmt.Sprintf("unknown post-experiment rule %q", rule)}
	}
	if revertToCode != "" && rule != PostRuleAssign {
		return &Error{Category: CategoryValidation,
			Message: fmt.Sprintf("a revertTo condition (%q) only goes with the %q post rule, not %q", revertToCode, PostRuleAssign, rule)}
	}
	return nil
}

// SetPostRule makes experiment id hold a post rule (see HoldsPostRule): it
// reads the experiment, and unless it already holds the rule, PUTs it back
// with the rule and the server's id of the revertTo condition, then reads
// it again. The answer is that last read. When the read-back still does
// not hold the rule the error is an api error saying what the server
// holds. Never retried (the PUT is a write).
func (c *Client) SetPostRule(ctx context.Context, id, rule, revertToCode string) (*Experiment, error) {
	if err := checkPostRule(rule, revertToCode); err != nil {
		err.Method, err.URL = http.MethodPut, c.baseRedacted+"/experiments/"+id
		return nil, err
	}
	cur, err := c.Experiment(ctx, id)
	if err != nil {
		return nil, err
	}
	if cur.HoldsPostRule(rule, revertToCode) {
		return cur, nil
	}
	if err := cur.WithPostRule(rule, revertToCode); err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Method, e.URL = http.MethodPut, c.baseRedacted+"/experiments/"+id
		}
		return nil, err
	}
	if _, err := c.UpdateExperiment(ctx, cur); err != nil {
		return nil, err
	}
	got, err := c.Experiment(ctx, id)
	if err != nil {
		return nil, err
	}
	if !got.HoldsPostRule(rule, revertToCode) {
		return got, &Error{Category: CategoryAPI, Method: http.MethodPut, URL: c.baseRedacted + "/experiments/" + id,
			Message: fmt.Sprintf("the server did not keep the post rule: it holds %s", describePostRule(got))}
	}
	return got, nil
}

func describePostRule(e *Experiment) string {
	var b strings.Builder
	b.WriteString(e.PostExperimentRule)
	switch {
	case e.RevertTo == nil:
		b.WriteString(" with no revertTo")
	case e.ConditionByID(*e.RevertTo) == nil:
		fmt.Fprintf(&b, " with revertTo %s, which names no condition", *e.RevertTo)
	default:
		fmt.Fprintf(&b, " with revertTo %s", e.ConditionByID(*e.RevertTo).ConditionCode)
	}
	return b.String()
}
