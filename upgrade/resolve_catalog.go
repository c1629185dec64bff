package upgrade

import (
	"context"
	"errors"
	"strings"
)

// ResolveFlag finds the one flag ref names: an exact id, an exact key, then
// as ResolveExperiment does by name (exact, any case, unique prefix of a
// name or of an id). Keys are unique per context only, so an exact key held
// by several flags is ambiguous.
func ResolveFlag(flags []FeatureFlag, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	var byKey []ExperimentName
	names := make([]ExperimentName, 0, len(flags))
	for _, f := range flags {
		names = append(names, ExperimentName{ID: f.ID, Name: f.Name})
		if ref != "" && f.Key == ref {
			byKey = append(byKey, ExperimentName{ID: f.ID, Name: f.Name + " (" + strings.Join(f.Context, ",") + ")"})
		}
	}
	for _, f := range flags {
		if f.ID == ref {
			return f.ID, nil
		}
	}
	switch len(byKey) {
	case 1:
		return byKey[0].ID, nil
	case 0:
	default:
		return "", &RefError{Ref: ref, Candidates: byKey, Kind: "feature flag"}
	}
	return resolveKind(names, ref, "feature flag")
}

// ResolveSegment finds the one segment ref names, as ResolveExperiment does.
func ResolveSegment(segs []SegmentRecord, ref string) (string, error) {
	names := make([]ExperimentName, 0, len(segs))
	for _, s := range segs {
		names = append(names, ExperimentName{ID: s.ID, Name: s.Name})
	}
	return resolveKind(names, ref, "segment")
}

func resolveKind(names []ExperimentName, ref, kind string) (string, error) {
	id, err := ResolveExperiment(names, ref)
	var re *RefError
	if errors.As(err, &re) {
		re.Kind = kind
	}
	return id, err
}

// FlagSnapshot is what evaluating a flag needs, read in one go: the flag
// with its lists, every public segment with members (sub-segments are
// resolved through them) and the global exclusion segments.
type FlagSnapshot struct {
	Flag     *FeatureFlag
	Segments []SegmentRecord
	Global   []SegmentRecord
}

// FlagSnapshot reads flag id for evaluation. It reads admin routes only:
// nothing is recorded as an exposure. Sub-segments that are private lists
// (not in GET /segments) are read by their status route.
func (c *Client) FlagSnapshot(ctx context.Context, id string) (*FlagSnapshot, error) {
	f, err := c.Flag(ctx, id)
	if err != nil {
		return nil, err
	}
	all, err := c.Segments(ctx)
	if err != nil {
		return nil, err
	}
	global, err := c.GlobalSegments(ctx)
	if err != nil {
		return nil, err
	}
	snap := &FlagSnapshot{Flag: f, Segments: all.Segments, Global: global}
	known := map[string]bool{}
	for _, s := range append(append([]SegmentRecord{}, all.Segments...), global...) {
		known[s.ID] = true
	}
	var pending []string
	queue := func(subs []SegmentRecord) {
		for _, sub := range subs {
			if !known[sub.ID] {
				known[sub.ID] = true
				pending = append(pending, sub.ID)
			}
		}
	}
	for _, l := range append(append([]FlagList{}, f.Inclusion...), f.Exclusion...) {
		if l.Segment != nil {
			queue(l.Segment.SubSegments)
		}
	}
	for _, s := range snap.Segments {
		queue(s.SubSegments)
	}
	for len(pending) > 0 {
		id := pending[0]
		pending = pending[1:]
		st, err := c.SegmentStatus(ctx, id)
		if CategoryOf(err) == CategoryNotFound {
			continue // deleted meanwhile: it holds nobody
		}
		if err != nil {
			return nil, err
		}
		snap.Segments = append(snap.Segments, st.Segment)
		queue(st.Segment.SubSegments)
	}
	return snap, nil
}
