package actions

import (
	"context"
	"encoding/json"
	"testing"
)

type exporter interface {
	ExportFlag(ctx context.Context, id string) (json.RawMessage, error)
	ExportSegments(ctx context.Context, ids []string) (json.RawMessage, error)
}

// TestUndoFlagAndSegmentImports: an import's undo deletes the flags or
// segments it created (exported, deleted, imported back, undone).
func TestUndoFlagAndSegmentImports(t *testing.T) {
	h := newUndoHarness(t)
	ex, ok := extension[exporter](h.api)
	if !ok {
		t.Skip("no export routes")
	}
	_, raw := h.do(CreateSegmentParams{Name: "undo import " + undoSuffix, Context: "assign-prog", Users: []string{"u1"}})
	seg := decode[SegmentResult](t, raw)
	_, raw = h.do(CreateFeatureFlagParams{Name: "Undo import", Key: "UNDO_IMPORT_" + undoSuffix, Context: "assign-prog",
		ExcludeLists: []FlagListParam{{Users: []string{"u9"}}}})
	fl := decode[FlagResult](t, raw)
	flagFile, err := ex.ExportFlag(h.ctx, fl.ID)
	if err != nil {
		t.Fatal(err)
	}
	segFile, err := ex.ExportSegments(h.ctx, []string{seg.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.api.DeleteFlag(h.ctx, fl.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.api.DeleteSegment(h.ctx, seg.ID); err != nil {
		t.Fatal(err)
	}

	fi, _ := h.do(ImportFeatureFlagsParams{Files: []ImportFileParam{{Name: "flag.json", Content: string(flagFile)}}})
	if fi.After == nil || fi.Target.Kind != KindImportedFlags || fi.Target.ID == "" || fi.Target.ID == fl.ID {
		t.Fatalf("flag import's change: target %+v, after %s", fi.Target, fi.After)
	}
	si, _ := h.do(ImportSegmentsParams{Files: []ImportFileParam{{Name: "seg.json", Content: string(segFile)}}})
	if si.After == nil || si.Target.Kind != KindImportedSegments || si.Target.ID == "" {
		t.Fatalf("segment import's change: target %+v, after %s", si.Target, si.After)
	}
	h.undo(fi)
	h.undo(si)
	if now, _ := readImportedFlags(h.ctx, h.env(), fi.Target.ID); now != nil {
		t.Errorf("the imported flags are still there: %s", now)
	}
	if now, _ := readImportedSegments(h.ctx, h.env(), si.Target.ID); now != nil {
		t.Errorf("the imported segments are still there: %s", now)
	}
}
