package actions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// References in params: the params an action's type tags as naming a
// server object (`ref:"experiment"`, `ref:"feature_flag"`, `ref:"segment"`)
// may hold a name instead of an id, and are resolved with the one lookup
// of upgrade.Catalog, the CLI's, on the typed value being bound
// (RefParams). What is here is which catalog a reference
// is looked up in (a segment in the context the params are about) and the
// errors the model reads, which list what it could have meant.

// ResolveRefs resolves every reference of params (refs, from the action's
// Spec: the paths of params' type) that holds a name: an experiment by name or unique prefix; a flag
// by key (as written, then any case), name or prefix; a segment by name in
// the context the params are about (their context, the flag's, or the
// segment's). It changes params in place and reports whether it changed
// anything; a name that matches nothing, or several things, is an error
// that names the param and what it could mean. Ids are left alone:
// validation decides about them. A list action's missing kind is filled in
// from its list id.
func ResolveRefs(ctx context.Context, api CatalogAPI, refs []Ref, params RefParams) (bool, error) {
	changed := false
	for _, ref := range refs {
		if ref.Kind != RefExperiment {
			continue
		}
		ch, err := params.resolve(ref, func(v string) (string, error) {
			if strings.TrimSpace(v) == "" || upgrade.IsUUID(strings.TrimSpace(v)) {
				return v, nil
			}
			names, err := api.ExperimentNames(ctx)
			if err != nil {
				return v, fmt.Errorf("reading experiment names: %w", err)
			}
			return upgrade.ResolveExperiment(names, v)
		})
		if err != nil {
			return false, fmt.Errorf("%s: %w", ref.Path, err)
		}
		changed = changed || ch
	}
	ch, err := ResolveFlagRefs(ctx, api, refs, params)
	return changed || ch, err
}

// ResolveFlagRefs is ResolveRefs for the flag and segment references
// alone.
func ResolveFlagRefs(ctx context.Context, api CatalogAPI, refs []Ref, params RefParams) (bool, error) {
	r := &refResolver{ctx: ctx, api: api}
	changed := false
	appContext := params.str("context")
	resolve := func(kind RefKind, only func(path string) bool, fn func(string) (string, error)) error {
		for _, ref := range refs {
			if ref.Kind != kind || !only(ref.Path) {
				continue
			}
			ch, err := params.resolve(ref, fn)
			if err != nil {
				return fmt.Errorf("%s: %w", ref.Path, err)
			}
			changed = changed || ch
		}
		return nil
	}
	all := func(string) bool { return true }
	err := resolve(RefFeatureFlag, all, func(v string) (string, error) {
		if strings.TrimSpace(v) == "" {
			return v, nil
		}
		f, err := r.flag(v)
		if err != nil || f == nil {
			return v, err
		}
		appContext = f.ContextName()
		if r.fillKind(params, f.ID) {
			changed = true
		}
		return f.ID, nil
	})
	if err != nil {
		return false, err
	}
	// The segment a segment action is about comes first: its context is
	// the one the other segment names are looked up in.
	err = resolve(RefSegment, func(p string) bool { return p == "segment_id" }, func(v string) (string, error) {
		if id := idValue(v); upgrade.IsUUID(id) {
			if d, err := r.segments(); err == nil {
				if s, ok := d.get(id); ok {
					appContext = s.Context
				}
			}
			return v, nil
		}
		s, err := r.segment(v, "")
		if err != nil {
			return v, err
		}
		appContext = s.Context
		return s.ID, nil
	})
	if err != nil {
		return false, err
	}
	err = resolve(RefSegment, func(p string) bool { return p != "segment_id" }, func(v string) (string, error) {
		if strings.TrimSpace(v) == "" || upgrade.IsUUID(strings.TrimSpace(v)) {
			return v, nil
		}
		s, err := r.segment(v, appContext)
		if err != nil {
			return v, err
		}
		return s.ID, nil
	})
	return changed, err
}

type refResolver struct {
	ctx  context.Context
	api  CatalogAPI
	segs *segDir
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

// flag finds the flag a reference means (upgrade.Catalog.Resolve). nil,
// no error: an id the server does not list (validation reports it).
func (r *refResolver) flag(ref string) (*upgrade.FeatureFlag, error) {
	ref = strings.TrimSpace(ref)
	all, err := r.api.Flags(r.ctx)
	if err != nil {
		return nil, fmt.Errorf("reading feature flags: %w", err)
	}
	n, err := upgrade.Catalog{Kind: upgrade.KindFeatureFlag, Items: upgrade.FlagsNamed(all)}.Resolve(ref)
	byID := func(id string) int {
		return slices.IndexFunc(all, func(f upgrade.FeatureFlag) bool { return f.ID == id })
	}
	var re *upgrade.RefError
	switch {
	case err == nil:
		return &all[byID(n.ID)], nil
	case !errors.As(err, &re):
		return nil, err
	case len(re.Candidates) > 0:
		var found []upgrade.FeatureFlag
		for _, c := range re.Candidates {
			found = append(found, all[byID(c.ID)])
		}
		return nil, fmt.Errorf("%q names %d feature flags (%s); use the id", ref, len(found), flagNames(found))
	case upgrade.IsUUID(ref):
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
func (r *refResolver) fillKind(params RefParams, flagID string) bool {
	listID, kind := params.str("list_id"), params.str("kind")
	if listID == "" || strings.TrimSpace(kind) != "" {
		return false
	}
	f, err := readFlag(r.ctx, r.api, flagID)
	if err != nil {
		return false
	}
	if l, ok := f.anyList(idValue(listID)); ok {
		return params.setStr("kind", l.Kind)
	}
	return false
}

// segment finds the public segment a name means (upgrade.Catalog.Resolve),
// in appContext first when the name is used in several contexts.
func (r *refResolver) segment(ref, appContext string) (segInfo, error) {
	d, err := r.segments()
	if err != nil {
		return segInfo{}, err
	}
	n, err := upgrade.Catalog{Kind: upgrade.KindSegment, Items: d.named, Prefer: appContext}.Resolve(ref)
	var re *upgrade.RefError
	switch {
	case err == nil:
		return d.byID[n.ID], nil
	case !errors.As(err, &re):
		return segInfo{}, err
	case len(re.Candidates) == 0:
		var names []string
		for _, id := range d.order {
			if s := d.byID[id]; appContext == "" || s.Context == appContext {
				names = append(names, fmt.Sprintf("%s (%s)", quote(s.Name), s.Context))
			}
		}
		return segInfo{}, fmt.Errorf("no public segment is named %q; the segments are %s", strings.TrimSpace(ref), joinOrNone(names))
	}
	var names []string
	for _, c := range re.Candidates {
		s := d.byID[c.ID]
		names = append(names, fmt.Sprintf("%s in %s (id %s)", quote(s.Name), s.Context, s.ID))
	}
	return segInfo{}, fmt.Errorf("%q names %d segments (%s); use the id", strings.TrimSpace(ref), len(names), strings.Join(names, ", "))
}
