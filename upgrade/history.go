package upgrade

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
)

// Audit log entry types (upgrade-flags-segments.md, Experiments).
const (
	AuditExperimentCreated      = "experimentCreated"
	AuditExperimentStateChanged = "experimentStateChanged"
	AuditExperimentUpdated      = "experimentUpdated"
	AuditExperimentDeleted      = "experimentDeleted"
	AuditFlagCreated            = "featureFlagCreated"
	AuditFlagStatusChanged      = "featureFlagStatusChanged"
	AuditFlagUpdated            = "featureFlagUpdated"
	AuditFlagDeleted            = "featureFlagDeleted"
)

// AuditRequest is the body of POST /audit; set at most one of ExperimentID
// and FlagID.
type AuditRequest struct {
	Skip         int    `json:"skip"`
	Take         int    `json:"take"`
	ExperimentID string `json:"experimentId,omitempty"`
	FlagID       string `json:"flagId,omitempty"`
}

// AuditEntry is one audit log row; Data depends on Type (for a state change:
// experimentId, experimentName, previousState, newState).
type AuditEntry struct {
	ID        string          `json:"id,omitempty"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	CreatedAt string          `json:"createdAt,omitempty"`
	UpdatedAt string          `json:"updatedAt,omitempty"`
	User      json.RawMessage `json:"user,omitempty"`
}

// AuditPage is the answer of POST /audit, newest entry first.
type AuditPage struct {
	Total int          `json:"total"`
	Nodes []AuditEntry `json:"nodes"`
}

// Audit returns one page of the audit log, optionally of one experiment or
// flag. A POST that only reads, so it is retried.
func (c *Client) Audit(ctx context.Context, req AuditRequest) (*AuditPage, error) {
	const path = "/audit"
	if req.ExperimentID != "" && req.FlagID != "" {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, "audit: ask for an experiment or a flag, not both")
	}
	var out AuditPage
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	if out.Nodes == nil {
		out.Nodes = []AuditEntry{}
	}
	return &out, nil
}

// StateHistory returns the state changes of experiment id, oldest first
// (GET /experiments/single/{id}, stateTimeLogs sorted by timeLog).
func (c *Client) StateHistory(ctx context.Context, id string) ([]StateTimeLog, error) {
	e, err := c.Experiment(ctx, id)
	if err != nil {
		return nil, err
	}
	return SortedHistory(e.StateTimeLogs), nil
}

// SortedHistory copies logs sorted by time, oldest first (the server keeps
// no order); ties keep their order.
func SortedHistory(logs []StateTimeLog) []StateTimeLog {
	out := append([]StateTimeLog{}, logs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].TimeLog < out[j].TimeLog })
	return out
}
