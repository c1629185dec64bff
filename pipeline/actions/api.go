package actions

import (
	"context"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The UpGrade operations the actions use, one small interface per object,
// so that an action's code (and the helpers it calls) names the narrow one
// it needs and its tests fake only that. The signatures are those of
// *upgrade.Client (docs/CONTRACTS.md): the real client satisfies every
// one, and Env carries it as the whole API.

// ExperimentAPI is the experiment routes: the create, update, state,
// delete, stats and list actions and the balance job's summary.
type ExperimentAPI interface {
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

// UserAPI is the part of UpGrade a simulated user talks to: the client
// routes under /v6. The balance job needs nothing else, so its tests can
// fake three methods.
type UserAPI interface {
	Init(ctx context.Context, userID string, req upgrade.InitRequest) (*upgrade.InitResponse, error)
	Assign(ctx context.Context, userID, context string) ([]upgrade.Assignment, error)
	Mark(ctx context.Context, userID string, req upgrade.MarkRequest) (*upgrade.MarkResponse, error)
}

// FlagReader is the reads of feature flags.
type FlagReader interface {
	Flags(ctx context.Context) ([]upgrade.FeatureFlag, error)
	Flag(ctx context.Context, id string) (*upgrade.FeatureFlag, error)
}

// FlagAPI is the feature flag routes, lists included
// (upgrade-flags-segments.md).
type FlagAPI interface {
	FlagReader
	CreateFlag(ctx context.Context, f *upgrade.FeatureFlag) (*upgrade.FeatureFlag, error)
	UpdateFlag(ctx context.Context, f *upgrade.FeatureFlag) (*upgrade.FeatureFlag, error)
	SetFlagStatus(ctx context.Context, id, status string) (*upgrade.FeatureFlag, error)
	SetFlagFilterMode(ctx context.Context, id, mode string) (*upgrade.FeatureFlag, error)
	DeleteFlag(ctx context.Context, id string) (*upgrade.FeatureFlag, error)
	AddFlagList(ctx context.Context, kind upgrade.ListKind, in upgrade.FlagListInput) (*upgrade.FlagList, error)
	UpdateFlagList(ctx context.Context, kind upgrade.ListKind, in upgrade.FlagListInput) (*upgrade.FlagList, error)
	DeleteFlagList(ctx context.Context, kind upgrade.ListKind, listID string) (*upgrade.SegmentRecord, error)
}

// SegmentReader is the reads of segments.
type SegmentReader interface {
	Segments(ctx context.Context) (*upgrade.SegmentsAnswer, error)
	Segment(ctx context.Context, id string) (*upgrade.SegmentRecord, error)
}

// SegmentAPI is the segment routes.
type SegmentAPI interface {
	SegmentReader
	UpsertSegment(ctx context.Context, in upgrade.SegmentInput) (*upgrade.SegmentRecord, error)
	DeleteSegment(ctx context.Context, id string) (*upgrade.SegmentRecord, error)
}

// MetadataAPI is the app contexts' metadata (conditions, sites, targets,
// group types) that validation checks params against.
type MetadataAPI interface {
	ContextMetadata(ctx context.Context) (upgrade.ContextMetadata, error)
}

// CatalogAPI is what resolving references reads (refs.go): the names of
// experiments, flags and segments, and one flag for a list's kind.
type CatalogAPI interface {
	ExperimentNames(ctx context.Context) ([]upgrade.ExperimentName, error)
	FlagReader
	SegmentReader
}

// MetricAPI is the metric routes and what the results read
// (upgrade-results-designs.md sections 1-2, 4-5).
type MetricAPI interface {
	Metrics(ctx context.Context) ([]upgrade.MetricNode, error)
	SaveMetrics(ctx context.Context, units []upgrade.MetricUnit, contexts []string) ([]upgrade.MetricNode, error)
	DeleteMetric(ctx context.Context, key string) ([]upgrade.MetricNode, error)
	ReadResults(ctx context.Context, id string) (*upgrade.ResultsInput, error)
}

// API is every operation together: what Env carries, so that one concrete
// client serves every action.
type API interface {
	ExperimentAPI
	UserAPI
	FlagAPI
	SegmentAPI
	MetadataAPI
	MetricAPI
}

// The real client must keep satisfying API; this fails to compile otherwise.
var _ API = (*upgrade.Client)(nil)
