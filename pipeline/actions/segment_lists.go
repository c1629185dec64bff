package actions

import (
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Experiment lists naming public segments. UpGrade's web UI makes an
// inclusion or exclusion list of kind "segment" (and POST
// /experiments/inclusionList with subSegmentIds does the same): a list row
// of its own whose members are those of the public segments it names. The
// agent's experiment actions have no params for them; they show them in
// their plans and keep them as they are (upgrade.Client.SetLists never
// deletes such a row), see docs/actions.md "Lists naming segments".

// fmtSegmentNames prints segment names for a plan: `segment "pilot
// schools"`, `segments "a", "b"`.
func fmtSegmentNames(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = quote(n)
	}
	if len(parts) == 1 {
		return "segment " + parts[0]
	}
	return "segments " + strings.Join(parts, ", ")
}

// segmentListLines adds a line per kind of e's lists that names public
// segments ("Included: segment "pilot schools""), with note after it.
func (b *Planner) segmentListLines(e *upgrade.Experiment, indent, note string) {
	for _, k := range []struct {
		label string
		seg   upgrade.Segment
	}{{"Included", e.Inclusion}, {"Excluded", e.Exclusion}} {
		if names := k.seg.SegmentNames(); len(names) > 0 {
			b.Line("%s%s: %s%s", indent, k.label, fmtSegmentNames(names), note)
		}
	}
}

// updateSegmentNote is what an update plan says after a segment list.
func updateSegmentNote(e *upgrade.Experiment, u UpdateExperimentParams) string {
	if e.FilterMode == upgrade.FilterExcludeAll && u.FilterMode != nil && *u.FilterMode == upgrade.FilterIncludeAll && !e.Inclusion.Empty() {
		return " (a list of its own, kept as it is; under includeAll an inclusion list has no effect)"
	}
	return " (a list of its own, kept as it is)"
}

// keptSegmentLists fails when the lists of after name other public
// segments than those of before: an update never changes them, so a
// difference is reported, never passed over.
func keptSegmentLists(before, after *upgrade.Experiment) error {
	for _, k := range []struct {
		kind     string
		was, now upgrade.Segment
	}{{"inclusion", before.Inclusion, after.Inclusion}, {"exclusion", before.Exclusion, after.Exclusion}} {
		if !slices.Equal(k.was.SegmentIDs(), k.now.SegmentIDs()) {
			return fmt.Errorf("its %s lists naming segments changed: they were %s, they are %s",
				k.kind, segmentsOrNone(k.was), segmentsOrNone(k.now))
		}
	}
	return nil
}

func segmentsOrNone(s upgrade.Segment) string {
	if names := s.SegmentNames(); len(names) > 0 {
		return fmtSegmentNames(names)
	}
	return "(none)"
}
