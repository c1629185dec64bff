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
	FlagAPI
}

// FlagAPI is every UpGrade operation the feature flag and segment actions
// and lookups use (upgrade-flags-segments.md).
type FlagAPI interface {
	Flags(ctx context.Context) ([]upgrade.FeatureFlag, error)
	Flag(ctx context.Context, id string) (*upgrade.FeatureFlag, error)
	CreateFlag(ctx context.Context, f *upgrade.FeatureFlag) (*upgrade.FeatureFlag, error)
	UpdateFlag(ctx context.Context, f *upgrade.FeatureFlag) (*upgrade.FeatureFlag, error)
	SetFlagStatus(ctx context.Context, id, status string) (*upgrade.FeatureFlag, error)
	SetFlagFilterMode(ctx context.Context, id, mode string) (*upgrade.FeatureFlag, error)
	DeleteFlag(ctx context.Context, id string) (*upgrade.FeatureFlag, error)
	AddFlagList(ctx context.Context, kind upgrade.ListKind, in upgrade.FlagListInput) (*upgrade.FlagList, error)
	UpdateFlagList(ctx context.Context, kind upgrade.ListKind, in upgrade.FlagListInput) (*upgrade.FlagList, error)
	DeleteFlagList(ctx context.Context, kind upgrade.ListKind, listID string) (*upgrade.SegmentRecord, error)
	Segments(ctx context.Context) (*upgrade.SegmentsAnswer, error)
	Segment(ctx context.Context, id string) (*upgrade.SegmentRecord, error)
	UpsertSegment(ctx context.Context, in upgrade.SegmentInput) (*upgrade.SegmentRecord, error)
	DeleteSegment(ctx context.Context, id string) (*upgrade.SegmentRecord, error)
}

// The real client must keep satisfying API; this fails to compile otherwise.
var _ API = (*upgrade.Client)(nil)
