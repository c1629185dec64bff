package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// How undo takes back a flag or segment import: it deletes what the
// import created (its before is nothing), as the experiment import's does.

// Kinds of the objects an import created, by their ids joined with commas.
const (
	KindImportedFlags    = "imported_feature_flags"
	KindImportedSegments = "imported_segments"
)

// declareUndoImports registers this file's undo kinds and tracking (not per registry).
func declareUndoImports(*Registry) {
	RegisterKind(KindImportedFlags, Kind{Read: readImportedFlags, Name: importedNames, Restore: restoreImportedFlags,
		Refuse: func(_, _ json.RawMessage) string { return "" }})
	RegisterKind(KindImportedSegments, Kind{Read: readImportedSegments, Name: importedNames, Restore: restoreImportedSegments,
		Refuse: func(_, _ json.RawMessage) string { return "" }})
	createdIDs := func(raw json.RawMessage) string {
		var r struct {
			Created []struct {
				ID string `json:"id"`
			} `json:"created"`
		}
		_ = json.Unmarshal(raw, &r)
		ids := make([]string, len(r.Created))
		for i, c := range r.Created {
			ids[i] = c.ID
		}
		return strings.Join(ids, ",")
	}
	Track(ImportFeatureFlags, Tracking{Kind: KindImportedFlags, ResultID: createdIDs})
	Track(ImportSegments, Tracking{Kind: KindImportedSegments, ResultID: createdIDs})
}

// readImported reads each id with read and keeps those still there (null
// when none is).
func readImported(ctx context.Context, env Env, ids string, read func(context.Context, Env, string) (json.RawMessage, error)) (json.RawMessage, error) {
	var out []json.RawMessage
	for _, id := range strings.Split(ids, ",") {
		if id == "" {
			continue
		}
		o, err := read(ctx, env, id)
		if err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return snapshot(out)
}

func readImportedFlags(ctx context.Context, env Env, ids string) (json.RawMessage, error) {
	return readImported(ctx, env, ids, readFlagSnap)
}

func readImportedSegments(ctx context.Context, env Env, ids string) (json.RawMessage, error) {
	return readImported(ctx, env, ids, func(ctx context.Context, env Env, id string) (json.RawMessage, error) {
		s, err := env.API.Segment(ctx, id)
		if err != nil {
			if isNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return snapshot(s)
	})
}

func importedNames(obj json.RawMessage) string {
	var os []json.RawMessage
	_ = json.Unmarshal(obj, &os)
	names := make([]string, len(os))
	for i, o := range os {
		names[i] = snapName(o)
	}
	return strings.Join(names, ", ")
}

// deleteImported deletes every object of now with del.
func deleteImported(ids string, want, now json.RawMessage, del func(id, name string) error) (string, error) {
	if want != nil {
		return ids, fmt.Errorf("an import's undo only deletes what it created")
	}
	var os []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(now, &os); err != nil {
		return ids, fmt.Errorf("reading the imported objects: %w", err)
	}
	for _, o := range os {
		if err := del(o.ID, o.Name); err != nil && !isNotFound(err) {
			return ids, err
		}
	}
	return ids, nil
}

func restoreImportedFlags(ctx context.Context, env Env, ids string, want, now json.RawMessage) (string, error) {
	return deleteImported(ids, want, now, func(id, name string) error {
		if _, err := env.API.DeleteFlag(ctx, id); err != nil {
			return fmt.Errorf("deleting imported feature flag %q: %w", name, err)
		}
		return nil
	})
}

func restoreImportedSegments(ctx context.Context, env Env, ids string, want, now json.RawMessage) (string, error) {
	return deleteImported(ids, want, now, func(id, name string) error {
		if _, err := env.API.DeleteSegment(ctx, id); err != nil {
			return fmt.Errorf("deleting imported segment %q: %w", name, err)
		}
		return nil
	})
}
