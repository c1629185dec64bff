package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// DeleteSegment is the name of the delete_segment action.
const DeleteSegment Name = "delete_segment"

// DeleteSegmentParams are the params of delete_segment.
type DeleteSegmentParams struct {
	SegmentID string `json:"segment_id" jsonschema:"id of the public segment to delete (a name is resolved)" ref:"segment"`
}

// Action implements Params.
func (DeleteSegmentParams) Action() Name { return DeleteSegment }

func (p DeleteSegmentParams) canonical() DeleteSegmentParams {
	return DeleteSegmentParams{SegmentID: idValue(p.SegmentID)}
}

// declareSegmentDelete declares this file's action in r.
func declareSegmentDelete(r *Registry) {
	Add(r, Def[DeleteSegmentParams]{
		Name: DeleteSegment, Order: 230, Destructive: true, Invalidates: []Cache{CacheFlags, CacheExperiments},
		Object:      ObjectSegment,
		Description: "Delete a public segment for good; it vanishes from every flag, experiment and segment that uses it.",
		Canonical:   DeleteSegmentParams.canonical,
		Validate: func(c *Checker, p DeleteSegmentParams) error {
			_, err := c.segment("segment_id", p.SegmentID)
			return err
		},
		Plan:      planDeleteSegment,
		Execute:   executeDeleteSegment,
		Reconcile: reconcileDeleteSegment,
		Report: ReportAs(func(r segmentDeleteResult) string {
			s := fmt.Sprintf("Deleted public segment %q (id %s).", r.Name, r.ID)
			if len(r.UsedBy) > 0 {
				s += " It is gone from " + strings.Join(r.UsedBy, ", ") + "."
			}
			return s
		}),
	})
}

func planDeleteSegment(b *Planner, p DeleteSegmentParams) error {
	s, d, err := b.segmentAndSegments(p.SegmentID)
	if err != nil {
		return err
	}
	b.Line("delete public segment %s (id %s, context %s).", quote(s.Name), s.ID, ident(s.Context))
	b.Line("  Members: %s", fmtMembers(s.Members, d))
	uses := segmentUsageLines(b, d, s)
	if live := liveUses(uses); len(live) > 0 {
		b.Warn("the segment is used by %s: UpGrade deletes it silently from their lists, and the change applies to them from the next request", strings.Join(live, ", "))
	} else if len(uses) > 0 || len(d.parents(s.ID)) > 0 {
		b.Warn("the segment is removed from every list and segment that holds it")
	}
	return nil
}

type segmentDeleteResult struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Deleted bool     `json:"deleted"`
	UsedBy  []string `json:"used_by,omitempty"`
}

func executeDeleteSegment(ctx context.Context, env Env, p DeleteSegmentParams, _ string) (Outcome, error) {
	d, err := readSegments(ctx, env.API)
	if err != nil {
		return Outcome{}, err
	}
	s, ok := d.get(p.SegmentID)
	if !ok {
		return Outcome{}, fmt.Errorf("no public segment with id %s", p.SegmentID)
	}
	var usedBy []string
	for _, u := range d.usages(s.ID) {
		usedBy = append(usedBy, fmt.Sprintf("%s %s", u.Kind, quote(u.Name)))
	}
	if _, err := env.API.DeleteSegment(ctx, p.SegmentID); err != nil {
		return Outcome{}, err
	}
	if _, err := env.API.Segment(ctx, p.SegmentID); err == nil {
		return Outcome{}, fmt.Errorf("segment %q: the server answered the delete, but still has the segment", s.Name)
	} else if !isNotFound(err) {
		return Outcome{}, fmt.Errorf("segment %q was deleted, but reading it back failed: %w", s.Name, err)
	}
	return Result(segmentDeleteResult{ID: s.ID, Name: s.Name, Deleted: true, UsedBy: minus(usedBy, nil)})
}

func reconcileDeleteSegment(ctx context.Context, env Env, p DeleteSegmentParams, _ string, _ time.Time) (Reconciliation, error) {
	rec, err := env.API.Segment(ctx, p.SegmentID)
	if err != nil {
		if isNotFound(err) {
			raw, _ := json.Marshal(segmentDeleteResult{ID: p.SegmentID, Deleted: true})
			return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("segment %s no longer exists: the delete happened", p.SegmentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile delete_segment: reading segment %s: %w", p.SegmentID, err)
	}
	return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("segment %q still exists: the delete did not happen", rec.Name)}, nil
}
