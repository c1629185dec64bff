package upgrade

import (
	"context"
)

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
