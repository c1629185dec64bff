package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// CreateSegment is the name of the create_segment action.
const CreateSegment Name = "create_segment"

// CreateSegmentParams are the params of create_segment: a public segment.
type CreateSegmentParams struct {
	Name        string       `json:"name" jsonschema:"segment name, unique among the public segments of the context"`
	Context     string       `json:"context" jsonschema:"app context, one of the context metadata's keys"`
	Description string       `json:"description,omitempty"`
	Tags        []string     `json:"tags,omitempty"`
	Users       []string     `json:"users,omitempty" jsonschema:"user ids"`
	Groups      []GroupParam `json:"groups,omitempty" jsonschema:"groups (type and group_id)"`
	SegmentIDs  []string     `json:"segment_ids,omitempty" jsonschema:"ids of public segments of the same context it holds (names are resolved)" ref:"segment"`
}

// Action implements Params.
func (CreateSegmentParams) Action() Name { return CreateSegment }

func (p CreateSegmentParams) canonical() CreateSegmentParams {
	return CreateSegmentParams{Name: strings.TrimSpace(p.Name), Context: strings.TrimSpace(p.Context), Description: strings.TrimSpace(p.Description),
		Tags: trimList(p.Tags), Users: trimList(p.Users), Groups: normGroups(p.Groups), SegmentIDs: idList(p.SegmentIDs)}
}

func (p CreateSegmentParams) members() memberSet {
	return memberSet{Users: p.Users, Groups: p.Groups, Segments: p.SegmentIDs}.sorted()
}

// declareSegmentCreate declares this file's action in r.
func declareSegmentCreate(r *Registry) {
	Add(r, Def[CreateSegmentParams]{
		Name: CreateSegment, Order: 210, Invalidates: []Cache{CacheFlags},
		Object:      ObjectSegment,
		Description: "Create a public segment: a named, reusable set of users, groups and other segments in one context.",
		Canonical:   CreateSegmentParams.canonical,
		Validate: func(c *Checker, p CreateSegmentParams) error {
			if p.Name == "" {
				c.Missing("name", "name is required")
			}
			if _, _, err := c.context(p.Context); err != nil {
				return err
			}
			if err := c.segmentName(p.Name, p.Context, ""); err != nil {
				return err
			}
			return c.members("", p.members(), p.Context, "")
		},
		Plan: func(b *Planner, p CreateSegmentParams) error {
			d, err := readSegments(b.ctx, b.api)
			if err != nil {
				return err
			}
			b.Line("Create public segment %s in context %s.", quote(p.Name), ident(p.Context))
			b.Line("  Members: %s", fmtMembers(p.members(), d))
			if p.Description != "" {
				b.Line("  Description: %s", quote(p.Description))
			}
			if len(p.Tags) > 0 {
				b.Line("  Tags: %s", fmtUsers(p.Tags))
			}
			b.Line("No flag or experiment uses it yet; add it to their lists to use it.")
			if p.members().empty() {
				b.Warn("the segment has no members")
			}
			return nil
		},
		Execute:   executeCreateSegment,
		Reconcile: reconcileCreateSegment,
		Report: ReportAs(func(r SegmentResult) string {
			return fmt.Sprintf("Created public segment %q (id %s) in context %s with %s, %s and %s.", r.Name, r.ID, r.Context,
				plural(len(r.Users), "user", "users"), plural(len(r.Groups), "group", "groups"), plural(len(r.SegmentIDs), "segment", "segments"))
		}),
	})
}

// segmentName checks that no other public segment of the context has the
// name (UpGrade refuses it with a 400 that names no field).
func (c *Checker) segmentName(name, appContext, selfID string) error {
	if name == "" || appContext == "" {
		return nil
	}
	d, err := c.segments()
	if err != nil {
		return err
	}
	for _, s := range d.byName(name, appContext) {
		if s.ID != selfID && s.Context == appContext {
			c.Add("name", "public segment %q (id %s) already has this name in context %s; names are unique per context: choose another name or change that segment", s.Name, s.ID, appContext)
		}
	}
	return nil
}

// SegmentResult is the compact form of a segment in results.
type SegmentResult struct {
	ID         string       `json:"id"`
	Name       string       `json:"name"`
	Context    string       `json:"context"`
	Users      []string     `json:"users"`
	Groups     []GroupParam `json:"groups"`
	SegmentIDs []string     `json:"segment_ids"`
}

func segmentResult(s segInfo) SegmentResult {
	return SegmentResult{ID: s.ID, Name: s.Name, Context: s.Context, Users: nonNilList(s.Members.Users),
		Groups: append([]GroupParam{}, s.Members.Groups...), SegmentIDs: nonNilList(s.Members.Segments)}
}

// segmentInput is the body that makes the server hold segment s.
func segmentInput(s segInfo) upgrade.SegmentInput {
	return upgrade.SegmentInput{ID: s.ID, Name: s.Name, Description: s.Description, Context: s.Context, Type: upgrade.SegmentPublic,
		Tags: nonNilList(s.Tags), UserIDs: nonNilList(s.Members.Users), Groups: groupRefs(s.Members.Groups), SubSegmentIDs: nonNilList(s.Members.Segments)}
}

func segmentDiffs(want, got segInfo) []string {
	var out []string
	if want.Name != got.Name {
		out = append(out, fmt.Sprintf("name: %s, approved %s", quote(got.Name), quote(want.Name)))
	}
	if want.Context != got.Context {
		out = append(out, fmt.Sprintf("context: %s, approved %s", got.Context, want.Context))
	}
	if want.Description != got.Description {
		out = append(out, fmt.Sprintf("description: %s, approved %s", quoteOrNone(got.Description), quoteOrNone(want.Description)))
	}
	if fmtUsers(want.Tags) != fmtUsers(got.Tags) {
		out = append(out, fmt.Sprintf("tags: %s, approved %s", fmtUsers(got.Tags), fmtUsers(want.Tags)))
	}
	if d := diffMembers(got.Members.sorted(), want.Members.sorted()); !d.empty() {
		out = append(out, "members differ from the approved ones")
	}
	return out
}

// holdSegment writes segment want and reads it back; one more write
// repairs a difference, a difference left is an error that names it.
func holdSegment(ctx context.Context, api SegmentAPI, want segInfo) (segInfo, error) {
	for attempt := 0; ; attempt++ {
		if _, err := api.UpsertSegment(ctx, segmentInput(want)); err != nil {
			if attempt == 0 {
				return segInfo{}, err
			}
			return segInfo{}, fmt.Errorf("the write that repairs it failed: %w", err)
		}
		rec, err := api.Segment(ctx, want.ID)
		if err != nil {
			return segInfo{}, fmt.Errorf("segment %q was written, but reading it back failed: %w", want.Name, err)
		}
		got := segInfoOf(rec)
		diffs := segmentDiffs(want, got)
		if len(diffs) == 0 {
			return got, nil
		}
		if attempt > 0 {
			return got, fmt.Errorf("segment %q was written, but the server does not hold what was approved (%s)", want.Name, strings.Join(diffs, "; "))
		}
	}
}

func executeCreateSegment(ctx context.Context, env Env, p CreateSegmentParams, key string) (Outcome, error) {
	// UpGrade upserts a segment by id: an id that exists is this
	// confirmation's segment from an earlier attempt, never written over.
	id := createID(key)
	if rec, err := env.API.Segment(ctx, id); err == nil {
		return Result(segmentResult(segInfoOf(rec)))
	} else if !isNotFound(err) {
		return Outcome{}, fmt.Errorf("checking whether segment %s exists before creating it: %w", id, err)
	}
	want := segInfo{ID: id, Name: p.Name, Context: p.Context, Description: p.Description, Tags: p.Tags, Members: p.members()}
	held, err := holdSegment(ctx, env.API, want)
	if err != nil {
		return Outcome{}, err
	}
	return Result(segmentResult(held))
}

func reconcileCreateSegment(ctx context.Context, env Env, p CreateSegmentParams, key string, _ time.Time) (Reconciliation, error) {
	if key != "" {
		id := createID(key)
		rec, err := env.API.Segment(ctx, id)
		switch {
		case err == nil:
			raw, err := Result(segmentResult(segInfoOf(rec)))
			return Reconciliation{Outcome: OutcomeDone, Result: raw.Result,
				Note: fmt.Sprintf("segment %q exists under the id this confirmation gives it (%s): the create happened", rec.Name, rec.ID)}, err
		case !isNotFound(err):
			return Reconciliation{}, fmt.Errorf("reconcile create_segment: reading segment %s: %w", id, err)
		}
	}
	d, err := readSegments(ctx, env.API)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile create_segment: %w", err)
	}
	for _, s := range d.byName(p.Name, p.Context) {
		if s.Context == p.Context {
			return Reconciliation{Outcome: OutcomeUnknown,
				Note: fmt.Sprintf("a segment named %q exists in context %s (id %s), but not under the id this confirmation gives it: someone else may have made it", s.Name, s.Context, s.ID)}, nil
		}
	}
	return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("no segment named %q exists in context %s: the create did not happen", p.Name, p.Context)}, nil
}
