package actions

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The fake's flag and segment import routes: a file that does not parse
// or whose key (flags) or name (segments) its context has is
// incompatible; one naming a segment the fake lacks is a warning. Import
// answers as validation does and creates nothing.

func (f *fakeAPI) ValidateFlagImport(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error) {
	if err := f.enter("ValidateFlagImport"); err != nil {
		return nil, err
	}
	flags, _ := f.Flags(ctx)
	segs, _ := f.Segments(ctx)
	out := make([]upgrade.ImportResult, len(files))
	for i, file := range files {
		out[i] = upgrade.ImportResult{FileName: file.FileName, CompatibilityType: upgrade.Compatible}
		var ff flagFile
		if json.Unmarshal([]byte(file.FileContent), &ff) != nil || ff.Key == "" ||
			slices.ContainsFunc(flags, func(o upgrade.FeatureFlag) bool { return o.Key == ff.Key && o.ContextName() == ff.context() }) {
			out[i].CompatibilityType = upgrade.Incompatible
			continue
		}
		for _, l := range append(slices.Clone(ff.Include), ff.Exclude...) {
			if len(missingSegmentIDs(l, segs.Segments, ff.context())) > 0 {
				out[i].CompatibilityType = upgrade.Warning
			}
		}
	}
	return out, nil
}

func (f *fakeAPI) ImportFlags(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error) {
	res, err := f.ValidateFlagImport(ctx, files)
	for i := range res {
		if res[i].CompatibilityType == upgrade.Incompatible {
			msg := upgrade.Incompatible
			res[i].Error = &msg
		}
		res[i].CompatibilityType = ""
	}
	return res, err
}

func (f *fakeAPI) ValidateSegmentImport(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error) {
	if err := f.enter("ValidateSegmentImport"); err != nil {
		return nil, err
	}
	segs, _ := f.Segments(ctx)
	out := make([]upgrade.ImportResult, len(files))
	for i, file := range files {
		out[i] = upgrade.ImportResult{FileName: file.FileName, CompatibilityType: upgrade.Compatible}
		var sf segmentFile
		if json.Unmarshal([]byte(file.FileContent), &sf) != nil || sf.Name == "" {
			msg := "Invalid JSON format"
			out[i].CompatibilityType, out[i].Error = upgrade.Incompatible, &msg
			continue
		}
		if segmentTwin(exportFile{obj: json.RawMessage(file.FileContent)}, segs.Segments) != nil {
			msg := "Invalid Segment data: Invalid Segment Name: " + sf.Name + " is already used by another segment with same context. "
			out[i].CompatibilityType, out[i].Error = upgrade.Incompatible, &msg
			continue
		}
		for _, sub := range sf.SubSegments {
			if !slices.ContainsFunc(segs.Segments, func(s upgrade.SegmentRecord) bool { return s.ID == sub.ID }) {
				msg := "warning: SubSegment: " + sub.ID + " not found."
				out[i].CompatibilityType, out[i].Error = upgrade.Warning, &msg
			}
		}
	}
	return out, nil
}

func (f *fakeAPI) ImportSegments(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error) {
	return f.ValidateSegmentImport(ctx, files)
}

func importPlanCases() []planCase {
	return []planCase{
		{name: "import_feature_flags", flags: true, p: ImportFeatureFlagsParams{Files: []ImportFileParam{
			{Name: "math.json", Content: `{"name":"Math hints","key":"MATH_HINTS_2","description":"","context":["assign-prog"],"status":"enabled","filterMode":"excludeAll","tags":[],
				"featureFlagSegmentInclusion":[{"enabled":true,"listType":"Segment","segment":{"name":"i","context":"assign-prog","type":"private","subSegments":[{"id":"` + districtID + `","name":"district 9"}]}}],
				"featureFlagSegmentExclusion":[{"enabled":true,"listType":"Segment","segment":{"name":"e","context":"assign-prog","type":"private","subSegments":[{"id":"0e0e0e0e-0000-4000-8000-000000000009","name":"gone"}]}}]}`},
			{Name: "two.json", Content: `[{"name":"A","key":"A","description":"","context":["mathstream"],"status":"disabled","filterMode":"includeAll","tags":[]},{"name":"B","key":"B","description":"","context":["mathstream"],"status":"enabled","filterMode":"excludeAll","tags":[]}]`},
		}}},
		{name: "import_segments", flags: true, p: ImportSegmentsParams{Files: []ImportFileParam{
			{Name: "pilot.json", Content: `[{"name":"Pilot Schools","context":"assign-prog","type":"public","individualForSegment":[{"userId":"u1"},{"userId":"u2"}],"groupForSegment":[{"groupId":"s1","type":"schoolId"}],
				"subSegments":[{"id":"0e0e0e0e-0000-4000-8000-000000000009","name":"gone","type":"public"}]}]`},
			{Name: "staff", Content: `{"name":"staff","context":"mathstream","type":"public","individualForSegment":[{"userId":"t1"}],"groupForSegment":[],"subSegments":[]}`},
		}}},
	}
}
