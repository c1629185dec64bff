package actions

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// How undo reads and puts back experiments, feature flags and segments,
// and which object each of their actions writes (spec/undo.md's table).
// The undo of every action is the same move: write the change's before
// state over what the server has now.

// Kinds of changed objects (a change's target.kind).
const (
	KindExperiment  = "experiment"
	KindFeatureFlag = "feature_flag"
	KindSegment     = "segment"
)

// declareUndoKinds registers this file's undo kinds and tracking (not per registry).
func declareUndoKinds(*Registry) {
	RegisterKind(KindExperiment, Kind{Read: readExperimentSnap, Name: snapName, Restore: restoreExperiment, Refuse: refuseExperiment,
		Normal: normalExperiment})
	RegisterKind(KindFeatureFlag, Kind{Read: readFlagSnap, Name: snapName, Restore: restoreFlag, Refuse: func(_, _ json.RawMessage) string { return "" }})
	RegisterKind(KindSegment, Kind{Read: readSegmentSnap, Name: segmentSnapName, Restore: restoreSegment, Refuse: func(_, _ json.RawMessage) string { return "" }})
	for name, t := range map[Name]Tracking{
		CreateExperiment:        {Kind: KindExperiment},
		UpdateExperiment:        {Kind: KindExperiment, IDParam: "experiment_id"},
		UpdateExperimentStatus:  {Kind: KindExperiment, IDParam: "experiment_id"},
		DeleteExperiment:        {Kind: KindExperiment, IDParam: "experiment_id"},
		CreateFeatureFlag:       {Kind: KindFeatureFlag},
		UpdateFeatureFlag:       {Kind: KindFeatureFlag, IDParam: "flag_id"},
		UpdateFeatureFlagStatus: {Kind: KindFeatureFlag, IDParam: "flag_id"},
		DeleteFeatureFlag:       {Kind: KindFeatureFlag, IDParam: "flag_id"},
		AddFeatureFlagList:      {Kind: KindFeatureFlag, IDParam: "flag_id"},
		UpdateFeatureFlagList:   {Kind: KindFeatureFlag, IDParam: "flag_id"},
		RemoveFeatureFlagList:   {Kind: KindFeatureFlag, IDParam: "flag_id"},
		CreateSegment:           {Kind: KindSegment},
		UpdateSegment:           {Kind: KindSegment, IDParam: "segment_id"},
		DeleteSegment:           {Kind: KindSegment, IDParam: "segment_id"},
	} {
		Track(name, t)
	}
}

func snapName(obj json.RawMessage) string {
	var o struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(obj, &o)
	return o.Name
}

// ---- experiments ----

// An experiment's snapshot is the experiment with its inclusion and
// exclusion lists, which UpGrade 6.5 keeps apart from it, filled in.
func readExperimentSnap(ctx context.Context, env Env, id string) (json.RawMessage, error) {
	e, err := env.API.Experiment(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	in, ex, err := env.API.Lists(ctx, id)
	if err != nil {
		return nil, err
	}
	e.Inclusion, e.Exclusion = mergeLists(in), mergeLists(ex)
	return snapshot(e)
}

// normalExperiment drops the condition payloads that only repeat their
// condition's code: UpGrade makes those itself on every write.
func normalExperiment(raw json.RawMessage) json.RawMessage {
	var e upgrade.Experiment
	if raw == nil || json.Unmarshal(raw, &e) != nil {
		return raw
	}
	var keep []json.RawMessage
	for _, p := range e.ConditionPayloads {
		var cp struct {
			ParentCondition string `json:"parentCondition"`
			Payload         *struct {
				Value string `json:"value"`
			} `json:"payload"`
		}
		if json.Unmarshal(p, &cp) == nil && cp.Payload != nil {
			if c := e.ConditionByID(cp.ParentCondition); c != nil && c.ConditionCode == cp.Payload.Value {
				continue
			}
		}
		keep = append(keep, p)
	}
	e.ConditionPayloads = keep
	// A real 6.5 reads a factorial back with its factors, levels and each
	// condition's level elements in no fixed order (docs/upgrade-real.md):
	// the same experiment must not read as changed.
	slices.SortStableFunc(e.Factors, func(a, b upgrade.Factor) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Name, b.Name))
	})
	for i := range e.Factors {
		slices.SortStableFunc(e.Factors[i].Levels, func(a, b upgrade.Level) int {
			return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Name, b.Name))
		})
	}
	for i := range e.Conditions {
		slices.SortStableFunc(e.Conditions[i].LevelCombinationElements, func(a, b upgrade.LevelCombinationElement) int {
			return cmp.Compare(a.ID, b.ID)
		})
	}
	return mustSnap(e)
}

func mergeLists(ls []upgrade.ExperimentList) upgrade.Segment {
	s := upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{}}
	for _, l := range ls {
		s.Users = append(s.Users, l.Segment.Users...)
		s.Groups = append(s.Groups, l.Segment.Groups...)
		s.Segments = append(s.Segments, l.Segment.Segments...)
	}
	return s
}

func decodeExperimentSnap(raw json.RawMessage) (upgrade.Experiment, error) {
	var s upgrade.Experiment
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("reading the recorded experiment: %w", err)
	}
	return s, nil
}

func refuseExperiment(want, now json.RawMessage) string {
	if want == nil || now == nil {
		return ""
	}
	w, err1 := decodeExperimentSnap(want)
	n, err2 := decodeExperimentSnap(now)
	if err1 != nil || err2 != nil || w.State == n.State {
		return ""
	}
	if _, ok := AllowedTransition(n.State, w.State); !ok {
		return fmt.Sprintf("UpGrade does not move an experiment from %s back to %s (%s)", n.State, w.State, describeTransitionsFrom(n.State))
	}
	return ""
}

func restoreExperiment(ctx context.Context, env Env, id string, want, now json.RawMessage) (string, error) {
	if want == nil {
		_, err := env.API.DeleteExperiment(ctx, id)
		return id, err
	}
	w, err := decodeExperimentSnap(want)
	if err != nil {
		return id, err
	}
	state, listsSame := upgrade.StateInactive, false
	if now == nil {
		// Re-created under its own id, with its condition and decision
		// point ids: the same seeded assignment draws.
		e := w
		e.State = upgrade.StateInactive
		e.StateTimeLogs = nil
		got, err := env.API.CreateExperiment(upgrade.WithCreateID(ctx, w.ID), &e)
		if err != nil {
			return id, err
		}
		id = got.ID
	} else {
		n, err := decodeExperimentSnap(now)
		if err != nil {
			return id, err
		}
		state = n.State
		e := w
		e.ID, e.State, e.VersionNumber, e.UpdatedAt = id, n.State, n.VersionNumber, n.UpdatedAt
		e.StateTimeLogs = nil
		ne := n
		ne.StateTimeLogs = nil
		if !Same(normalExperiment(mustSnap(e)), normalExperiment(mustSnap(ne))) {
			if _, err := env.API.UpdateExperiment(ctx, &e); err != nil {
				return id, err
			}
		}
		listsSame = reflect.DeepEqual(w.Inclusion, n.Inclusion) && reflect.DeepEqual(w.Exclusion, n.Exclusion)
	}
	if !listsSame {
		e := w
		e.ID = id
		if err := env.API.SetLists(ctx, &e, w.Inclusion, w.Exclusion); err != nil {
			return id, fmt.Errorf("putting back the lists: %w", err)
		}
	}
	if w.State != state {
		if _, ok := AllowedTransition(state, w.State); ok {
			if _, err := env.API.SetState(ctx, id, w.State); err != nil {
				return id, fmt.Errorf("putting back the status %s: %w", w.State, err)
			}
		}
	}
	return id, nil
}

func mustSnap(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	return raw
}

// ---- feature flags ----

func readFlagSnap(ctx context.Context, env Env, id string) (json.RawMessage, error) {
	f, err := env.API.Flag(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	f.Exposures = nil
	return snapshot(f)
}

func restoreFlag(ctx context.Context, env Env, id string, want, now json.RawMessage) (string, error) {
	if want == nil {
		_, err := env.API.DeleteFlag(ctx, id)
		return id, err
	}
	var wf upgrade.FeatureFlag
	if err := json.Unmarshal(want, &wf); err != nil {
		return id, fmt.Errorf("reading the recorded flag: %w", err)
	}
	w := flagStateOf(&wf)
	var cur flagState
	if now == nil {
		body := flagBodyOf(w)
		body.Status = upgrade.FlagDisabled // enabled once its lists are back
		got, err := env.API.CreateFlag(ctx, body)
		if err != nil {
			return id, err
		}
		cur = flagStateOf(got)
		cur.Include, cur.Exclude = nil, nil
	} else {
		var nf upgrade.FeatureFlag
		if err := json.Unmarshal(now, &nf); err != nil {
			return id, fmt.Errorf("reading the flag: %w", err)
		}
		cur = flagStateOf(&nf)
	}
	w.ID = cur.ID
	fields := w
	fields.Status = cur.Status
	if err := writeFlagFields(ctx, env.API, cur, fields); err != nil {
		return w.ID, err
	}
	for _, kind := range []string{ListInclude, ListExclude} {
		for _, l := range cur.lists(kind) {
			if _, ok := w.list(kind, l.ID); !ok {
				if _, err := env.API.DeleteFlagList(ctx, upgradeKind(kind), l.ID); err != nil {
					return w.ID, fmt.Errorf("removing the %s list %s: %w", kind, l.ID, err)
				}
			}
		}
		for _, l := range w.lists(kind) {
			c, ok := cur.list(kind, l.ID)
			in := listInput(w, kind, l.ID, l.Enabled, l.Members)
			var err error
			switch {
			case !ok:
				_, err = env.API.AddFlagList(ctx, upgradeKind(kind), in)
			case c.Enabled != l.Enabled || !reflect.DeepEqual(c.Members, l.Members):
				_, err = env.API.UpdateFlagList(ctx, upgradeKind(kind), in)
			}
			if err != nil {
				return w.ID, fmt.Errorf("putting back the %s list %s: %w", kind, l.ID, err)
			}
		}
	}
	if w.Status != cur.Status {
		if _, err := env.API.SetFlagStatus(ctx, w.ID, w.Status); err != nil {
			return w.ID, fmt.Errorf("putting back the status %s: %w", w.Status, err)
		}
	}
	return w.ID, nil
}

// ---- segments ----

// segmentSnap is a public segment with the flag and experiment lists that
// hold it, so that a deleted segment goes back into them.
type segmentSnap struct {
	Segment *upgrade.SegmentRecord `json:"segment"`
	InLists []segmentUse           `json:"in_lists,omitempty"`
}

// segmentUse is one list that holds a segment: a flag's list (by its
// id), or an experiment's inclusion or exclusion.
type segmentUse struct {
	Owner  string `json:"owner"` // flag, experiment
	ID     string `json:"id"`
	Kind   string `json:"kind"` // include, exclude
	ListID string `json:"list_id,omitempty"`
}

func segmentSnapName(obj json.RawMessage) string {
	var s segmentSnap
	if json.Unmarshal(obj, &s) != nil || s.Segment == nil {
		return ""
	}
	return s.Segment.Name
}

func readSegmentSnap(ctx context.Context, env Env, id string) (json.RawMessage, error) {
	rec, err := env.API.Segment(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	s := segmentSnap{Segment: rec}
	d, err := readSegments(ctx, env.API)
	if err != nil {
		return nil, err
	}
	seen := map[segmentUse]bool{}
	for _, u := range d.usages(id) {
		if u.Via != "" {
			continue // held through a parent segment, which keeps it
		}
		kind := ListInclude
		if u.List == ListExclude {
			kind = ListExclude
		}
		if u.Kind != "flag" {
			use := segmentUse{Owner: "experiment", ID: u.ID, Kind: kind}
			if !seen[use] {
				seen[use] = true
				s.InLists = append(s.InLists, use)
			}
			continue
		}
		f, err := readFlag(ctx, env.API, u.ID)
		if err != nil {
			return nil, err
		}
		for _, l := range f.lists(kind) {
			use := segmentUse{Owner: "flag", ID: u.ID, Kind: kind, ListID: l.ID}
			if slices.Contains(l.Members.Segments, id) && !seen[use] {
				seen[use] = true
				s.InLists = append(s.InLists, use)
			}
		}
	}
	return snapshot(s)
}

func restoreSegment(ctx context.Context, env Env, id string, want, now json.RawMessage) (string, error) {
	if want == nil {
		_, err := env.API.DeleteSegment(ctx, id)
		return id, err
	}
	var w segmentSnap
	if err := json.Unmarshal(want, &w); err != nil || w.Segment == nil {
		return id, fmt.Errorf("reading the recorded segment: %v", err)
	}
	got, err := env.API.UpsertSegment(ctx, w.Segment.Input())
	if err != nil {
		return id, err
	}
	id = got.ID
	if now != nil {
		return id, nil
	}
	for _, u := range w.InLists {
		if err := putBackInList(ctx, env, id, u); err != nil {
			return id, err
		}
	}
	return id, nil
}

// putBackInList adds segment id back to the list u names, when the list
// is still there and lacks it.
func putBackInList(ctx context.Context, env Env, id string, u segmentUse) error {
	if u.Owner == "flag" {
		f, err := readFlag(ctx, env.API, u.ID)
		if err != nil {
			if isNotFound(err) {
				return nil
			}
			return err
		}
		l, ok := f.list(u.Kind, u.ListID)
		if !ok || slices.Contains(l.Members.Segments, id) {
			return nil
		}
		m := l.Members
		m.Segments = append(slices.Clone(m.Segments), id)
		if _, err := env.API.UpdateFlagList(ctx, upgradeKind(u.Kind), listInput(f, u.Kind, l.ID, l.Enabled, m.sorted())); err != nil {
			return fmt.Errorf("putting the segment back into feature flag %q's %s list: %w", f.Name, u.Kind, err)
		}
		return nil
	}
	e, err := env.API.Experiment(ctx, u.ID)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	in, ex, err := env.API.Lists(ctx, u.ID)
	if err != nil {
		return err
	}
	inc, exc := mergeLists(in), mergeLists(ex)
	target := &inc
	if u.Kind == ListExclude {
		target = &exc
	}
	for _, r := range target.Segments {
		if r.ID == id {
			return nil
		}
	}
	target.Segments = append(target.Segments, upgrade.SegmentRef{ID: id})
	if err := env.API.SetLists(ctx, e, inc, exc); err != nil {
		return fmt.Errorf("putting the segment back into experiment %q's lists: %w", e.Name, err)
	}
	return nil
}
