package pipeline

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// reads is the turn's memoised context metadata.
type reads struct {
	metaOnce sync.Once
	meta     upgrade.ContextMetadata
	metaErr  error
}

// The turn's reads of UpGrade, memoised for the turn: nodes, tools and
// actions read through them, so a turn fetches the context metadata at
// most once and the experiment names once until an action changes them.

// metadata fetches the context metadata at most once per turn.
func (t *turn) metadata(ctx context.Context) (upgrade.ContextMetadata, error) {
	t.metaOnce.Do(func() {
		t.meta, t.metaErr = t.a.deps.API.ContextMetadata(ctx)
		if t.metaErr == nil {
			t.update(func(s *State) { s.ContextMetadata = t.meta })
		}
	})
	return t.meta, t.metaErr
}

func (t *turn) contextInfo(ctx context.Context, name string) (upgrade.ContextInfo, error) {
	md, err := t.metadata(ctx)
	if err != nil {
		return upgrade.ContextInfo{}, err
	}
	ci, ok := md[name]
	if !ok {
		return ci, inputErrorf("unknown context %q; valid contexts: %s", name, strings.Join(readmodel.ContextNames(md), ", "))
	}
	return ci, nil
}

func (t *turn) experimentNames(ctx context.Context) ([]upgrade.ExperimentName, error) {
	t.mu.Lock()
	cached := t.st.ExperimentNames
	t.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	names, err := t.a.deps.API.ExperimentNames(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Name < names[j].Name })
	t.update(func(s *State) { s.ExperimentNames = names })
	return names, nil
}

func (t *turn) allExperiments(ctx context.Context) ([]readmodel.Summary, error) {
	t.mu.Lock()
	cached := t.st.AllExperiments
	t.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	list, err := t.a.deps.API.Experiments(ctx)
	if err != nil {
		return nil, err
	}
	sums := readmodel.SummarizeAll(list)
	t.update(func(s *State) { s.AllExperiments = sums })
	return sums, nil
}

// resolveID accepts an id or a name (the rules of upgrade.ResolveExperiment:
// exact id or name, then a unique prefix).
func (t *turn) resolveID(ctx context.Context, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if upgrade.IsUUID(ref) {
		return strings.ToLower(ref), nil // UpGrade's ids are lower case
	}
	names, err := t.experimentNames(ctx)
	if err != nil {
		return "", err
	}
	id, err := upgrade.ResolveExperiment(names, ref)
	if err != nil {
		return "", inputErrorf("%v", err)
	}
	return id, nil
}

// turnAPI gives actions the turn's memoised context metadata, so a turn
// fetches it at most once.
type turnAPI struct {
	Backend
	t *turn
}

func (x turnAPI) ContextMetadata(ctx context.Context) (upgrade.ContextMetadata, error) {
	return x.t.metadata(ctx)
}

// ExperimentNames are the turn's cached names, for the reference resolver.
func (x turnAPI) ExperimentNames(ctx context.Context) ([]upgrade.ExperimentName, error) {
	return x.t.experimentNames(ctx)
}

// Underlying is the backend itself, for the actions' optional routes
// (actions.StratificationAPI).
func (x turnAPI) Underlying() any { return x.Backend }

func (t *turn) api() turnAPI { return turnAPI{Backend: t.a.deps.API, t: t} }
