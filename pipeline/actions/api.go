package actions

import (
	"context"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// UserAPI is the part of UpGrade a simulated user talks to: the client
// routes under /v6. The balance job needs nothing else, so its tests can
// fake three methods instead of twelve.
type UserAPI interface {
	Init(ctx context.Context, userID string, req upgrade.InitRequest) (*upgrade.InitResponse, error)
	Assign(ctx context.Context, userID, context string) ([]upgrade.Assignment, error)
	Mark(ctx context.Context, userID string, req upgrade.MarkRequest) (*upgrade.MarkResponse, error)
}

// API is every UpGrade operation the executor actions use. The signatures
// are those of *upgrade.Client (docs/CONTRACTS.md), so the real client, and
// any fake with the same methods, satisfies it.
type API interface {
	UserAPI
	ContextMetadata(ctx context.Context) (upgrade.ContextMetadata, error)
	ExperimentNames(ctx context.Context) ([]upgrade.ExperimentName, error)
	Experiments(ctx context.Context) ([]upgrade.Experiment, error)
	Experiment(ctx context.Context, id string) (*upgrade.Experiment, error)
	CreateExperiment(ctx context.Context, e *upgrade.Experiment) (*upgrade.Experiment, error)
	UpdateExperiment(ctx context.Context, e *upgrade.Experiment) (*upgrade.Experiment, error)
	SetState(ctx context.Context, id string, s upgrade.State) (*upgrade.Experiment, error)
	DeleteExperiment(ctx context.Context, id string) (*upgrade.Experiment, error)
	EnrollmentStats(ctx context.Context, id string) (*upgrade.EnrollmentStats, error)
	// Lists and SetLists read and write the inclusion and exclusion lists,
	// which UpGrade 6.5 keeps apart from the experiment (a PUT ignores them
	// and a single read shows none).
	Lists(ctx context.Context, id string) (inclusion, exclusion []upgrade.ExperimentList, err error)
	SetLists(ctx context.Context, e *upgrade.Experiment, inclusion, exclusion upgrade.Segment) error
}

// The real client must keep satisfying API; this fails to compile otherwise.
var _ API = (*upgrade.Client)(nil)
