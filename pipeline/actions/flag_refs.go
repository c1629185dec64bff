package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// ResolveFlagRefs turns what a model writes where a flag or segment id
// belongs into the id: a flag's key (any case) or name, a segment's name
// (in the context the params are about). It changes params in place and
// reports whether it changed anything; a name that matches nothing, or
// several things, is an error the model can act on. Ids are left alone:
// validation decides about them.
func ResolveFlagRefs(ctx context.Context, api API, action string, params map[string]any) (bool, error) {
	if !isFlagAction(action) {
		return false, nil
	}
	r := &refResolver{ctx: ctx, api: api}
	changed := false
	appContext, _ := params["context"].(string)
	if ref, ok := params["flag_id"].(string); ok && ref != "" {
		f, err := r.flag(ref)
		if err != nil {
			return false, fmt.Errorf("flag_id: %w", err)
		}
		if f != nil {
			if f.ID != ref {
				params["flag_id"] = f.ID
				changed = true
			}
			appContext = f.ContextName()
			if r.fillKind(params, f.ID) {
				changed = true
			}
		}
	}
	if ref, ok := params["segment_id"].(string); ok && ref != "" && !upgrade.IsUUID(strings.TrimSpace(ref)) {
		s, err := r.segment(ref, "")
		if err != nil {
			return false, fmt.Errorf("segment_id: %w", err)
		}
		params["segment_id"] = s.ID
		appContext = s.Context
		changed = true
	} else if ok {
		if d, err := r.segments(); err == nil {
			if s, found := d.get(idValue(ref)); found {
				appContext = s.Context
			}
		}
	}
	for _, key := range []string{"segment_ids", "add_segment_ids", "remove_segment_ids"} {
		c, err := r.segmentList(params, key, appContext)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	for _, key := range []string{"include_lists", "exclude_lists"} {
		lists, _ := params[key].([]any)
		if obj, ok := params[key].(map[string]any); ok {
			lists = []any{obj} // one list sent as an object
		}
		for i, l := range lists {
			obj, ok := l.(map[string]any)
			if !ok {
				continue
			}
			c, err := r.segmentList(obj, "segment_ids", appContext)
			if err != nil {
				return false, fmt.Errorf("%s[%d].%w", key, i, err)
			}
			changed = changed || c
		}
	}
	return changed, nil
}

func isFlagAction(action string) bool {
	switch Name(action) {
	case CreateFeatureFlag, UpdateFeatureFlag, UpdateFeatureFlagStatus, DeleteFeatureFlag, AddFeatureFlagList,
		UpdateFeatureFlagList, RemoveFeatureFlagList, CreateSegment, UpdateSegment, DeleteSegment:
		return true
	}
	return false
}

type refResolver struct {
	ctx   context.Context
	api   API
	flags []upgrade.FeatureFlag
	segs  *segDir
}

func (r *refResolver) segments() (*segDir, error) {
	if r.segs == nil {
		d, err := readSegments(r.ctx, r.api)
		if err != nil {
			return nil, err
		}
		r.segs = d
	}
	return r.segs, nil
}

// flag finds the flag a reference means: its id, its key (exactly, then
// in any case), its name, or a unique prefix of either. nil, no error:
// an id the server does not list (validation reports it).
func (r *refResolver) flag(ref string) (*upgrade.FeatureFlag, error) {
	ref = strings.TrimSpace(ref)
	all, err := r.api.Flags(r.ctx)
	if err != nil {
		return nil, fmt.Errorf("reading feature flags: %w", err)
	}
	r.flags = all
	id := idValue(ref)
	tiers := []func(f upgrade.FeatureFlag) bool{
		func(f upgrade.FeatureFlag) bool { return f.ID == id },
		func(f upgrade.FeatureFlag) bool { return f.Key == ref },
		func(f upgrade.FeatureFlag) bool { return strings.EqualFold(f.Key, ref) },
		func(f upgrade.FeatureFlag) bool { return strings.EqualFold(f.Name, ref) },
		func(f upgrade.FeatureFlag) bool {
			l := strings.ToLower(ref)
			return strings.HasPrefix(strings.ToLower(f.Key), l) || strings.HasPrefix(strings.ToLower(f.Name), l)
		},
	}
	for _, match := range tiers {
		var found []upgrade.FeatureFlag
		for _, f := range all {
			if match(f) {
				found = append(found, f)
			}
		}
		switch {
		case len(found) == 1:
			return &found[0], nil
		case len(found) > 1:
			return nil, fmt.Errorf("%q names %d feature flags (%s); use the id", ref, len(found), flagNames(found))
		}
	}
	if upgrade.IsUUID(ref) {
		return nil, nil
	}
	return nil, fmt.Errorf("no feature flag has the key or name %q; the flags are %s (find_feature_flag searches them)", ref, flagNames(all))
}

func flagNames(fs []upgrade.FeatureFlag) string {
	var parts []string
	for i, f := range fs {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(fs)-10))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (key %s, context %s, id %s)", quote(f.Name), f.Key, f.ContextName(), f.ID))
	}
	return joinOrNone(parts)
}

// fillKind sets a list action's missing kind from the list id.
func (r *refResolver) fillKind(params map[string]any, flagID string) bool {
	listID, _ := params["list_id"].(string)
	kind, _ := params["kind"].(string)
	if listID == "" || strings.TrimSpace(kind) != "" {
		return false
	}
	f, err := readFlag(r.ctx, r.api, flagID)
	if err != nil {
		return false
	}
	if l, ok := f.anyList(idValue(listID)); ok {
		params["kind"] = l.Kind
		return true
	}
	return false
}

// segment finds the public segment a name means, in appContext when the
// name is used in several contexts.
func (r *refResolver) segment(ref, appContext string) (segInfo, error) {
	d, err := r.segments()
	if err != nil {
		return segInfo{}, err
	}
	found := d.byName(ref, appContext)
	if len(found) == 0 {
		l := strings.ToLower(strings.TrimSpace(ref))
		for _, id := range d.order {
			s := d.byID[id]
			if strings.HasPrefix(strings.ToLower(s.Name), l) && (appContext == "" || s.Context == appContext) {
				found = append(found, s)
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		var names []string
		for _, id := range d.order {
			if s := d.byID[id]; appContext == "" || s.Context == appContext {
				names = append(names, fmt.Sprintf("%s (%s)", quote(s.Name), s.Context))
			}
		}
		return segInfo{}, fmt.Errorf("no public segment is named %q; the segments are %s", ref, joinOrNone(names))
	}
	var names []string
	for _, s := range found {
		names = append(names, fmt.Sprintf("%s in %s (id %s)", quote(s.Name), s.Context, s.ID))
	}
	return segInfo{}, fmt.Errorf("%q names %d segments (%s); use the id", ref, len(found), strings.Join(names, ", "))
}

// segmentList resolves the names in params[key] (a list, or one value).
func (r *refResolver) segmentList(params map[string]any, key, appContext string) (bool, error) {
	var items []any
	switch v := params[key].(type) {
	case []any:
		items = v
	case string:
		items = []any{v}
	default:
		return false, nil
	}
	changed := false
	out := slices.Clone(items)
	for i, it := range items {
		ref, ok := it.(string)
		if !ok || strings.TrimSpace(ref) == "" || upgrade.IsUUID(strings.TrimSpace(ref)) {
			continue
		}
		s, err := r.segment(ref, appContext)
		if err != nil {
			return false, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		out[i] = s.ID
		changed = true
	}
	if changed {
		params[key] = out
	}
	return changed, nil
}
