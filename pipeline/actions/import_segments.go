package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// SegmentPortabilityAPI is UpGrade's segment import routes, found on
// env.API as PortabilityAPI is.
type SegmentPortabilityAPI interface {
	ValidateSegmentImport(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error)
	ImportSegments(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error)
}

var _ SegmentPortabilityAPI = (*upgrade.Client)(nil)

// ImportSegments imports segments from UpGrade export files.
const ImportSegments Name = "import_segments"

// ImportSegmentsParams are the params of import_segments.
type ImportSegmentsParams struct {
	Files []ImportFileParam `json:"files" jsonschema:"UpGrade segment export files"`
}

// Action implements Params.
func (ImportSegmentsParams) Action() Name { return ImportSegments }

// declareImportSegments declares this file's action in r.
func declareImportSegments(r *Registry) {
	Add(r, Def[ImportSegmentsParams]{
		Name: ImportSegments, Order: 240, Object: ObjectSegment, Invalidates: []Cache{CacheFlags},
		Description: "Import segments from UpGrade export files (new ids; a name the context has is refused).",
		Canonical:   func(p ImportSegmentsParams) ImportSegmentsParams { p.Files = trimFileNames(p.Files); return p },
		Validate:    validateImportSegments,
		Plan:        planImportSegments,
		Execute:     executeImportSegments,
		Reconcile:   reconcileImportSegments,
		Report: ReportAs(func(r importedSegments) string {
			return importedLine("segment(s)", r.Created, func(s importedSegment) string {
				return fmt.Sprintf("%q (id %s, context %s)", s.Name, s.ID, s.Context)
			}) + notImported(r.Refused)
		}),
	})
}

// segmentFile is what a segment export holds that the plan needs.
type segmentFile struct {
	Name        string                 `json:"name"`
	Context     string                 `json:"context"`
	Type        string                 `json:"type"`
	Users       []upgrade.SegmentUser  `json:"individualForSegment"`
	Groups      []upgrade.SegmentGroup `json:"groupForSegment"`
	SubSegments []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"subSegments"`
}

func segmentPortAPI(api any) (SegmentPortabilityAPI, error) {
	p, ok := extension[SegmentPortabilityAPI](api)
	if !ok {
		return nil, fmt.Errorf("this UpGrade backend (%T) has no segment import routes", api)
	}
	return p, nil
}

func validateSegmentFiles(ctx context.Context, api any, files []ImportFileParam) ([]exportFile, []*upgrade.ImportResult, error) {
	p, err := segmentPortAPI(api)
	if err != nil {
		return nil, nil, err
	}
	items := splitExport(files, true)
	res, err := p.ValidateSegmentImport(ctx, serverFiles(items))
	if err != nil {
		return nil, nil, fmt.Errorf("validating the files with UpGrade: %w", err)
	}
	return items, resultsByName(items, res), nil
}

// segmentTwin finds the public segment of the file's name and context:
// UpGrade reports such a file incompatible and imports it anyway.
func segmentTwin(it exportFile, segs []upgrade.SegmentRecord) *upgrade.SegmentRecord {
	var f segmentFile
	if json.Unmarshal(it.obj, &f) != nil || f.Type == upgrade.SegmentPrivate {
		return nil
	}
	for i, s := range segs {
		if s.Type == upgrade.SegmentPublic && s.Name == f.Name && s.Context == f.Context {
			return &segs[i]
		}
	}
	return nil
}

func twinRefusal(it exportFile, t *upgrade.SegmentRecord) string {
	return fmt.Sprintf("%q: public segment %q (id %s) already exists in context %s: UpGrade reports the file incompatible and imports it anyway, as a second segment of that name, so it is refused; rename the segment in the file, or rename or delete the existing one first",
		it.FileName, t.Name, t.ID, t.Context)
}

// segmentReason is the server's reason without its prefix.
func segmentReason(r *upgrade.ImportResult) string {
	if r == nil {
		return "UpGrade did not answer for it"
	}
	msg := serverReason(strings.TrimPrefix(r.ErrorText(), "Invalid Segment data:"))
	if msg == "" {
		return "UpGrade refuses the file without saying why"
	}
	return msg
}

func validateImportSegments(c *Checker, p ImportSegmentsParams) error {
	if !checkFilesPresent(c, p.Files, "segment") {
		return nil
	}
	items, res, err := validateSegmentFiles(c.Context(), c.API(), p.Files)
	if err != nil {
		return err
	}
	all, err := c.API().Segments(c.Context())
	if err != nil {
		return fmt.Errorf("reading segments: %w", err)
	}
	for i, r := range res {
		if t := segmentTwin(items[i], all.Segments); t != nil {
			c.Add("files", "%s", twinRefusal(items[i], t))
			continue
		}
		if r == nil || r.CompatibilityType == upgrade.Incompatible {
			c.Add("files", "%q: incompatible: %s", items[i].FileName, segmentReason(r))
		}
	}
	return nil
}

func planImportSegments(b *Planner, p ImportSegmentsParams) error {
	items, res, err := validateSegmentFiles(b.Context(), b.API(), p.Files)
	if err != nil {
		return err
	}
	all, err := b.API().Segments(b.Context())
	if err != nil {
		return fmt.Errorf("reading segments: %w", err)
	}
	b.Line("Import %d segment(s); each is created with a new id:", len(items))
	for i, it := range items {
		var f segmentFile
		_ = json.Unmarshal(it.obj, &f)
		lists := 0
		for _, sub := range f.SubSegments {
			if sub.Type == upgrade.SegmentPrivate {
				lists++
			}
		}
		members := fmt.Sprintf("%s, %s, %s", plural(len(f.Users), "user", "users"), plural(len(f.Groups), "group", "groups"),
			plural(len(f.SubSegments)-lists, "segment", "segments"))
		if lists > 0 {
			members += ", " + plural(lists, "list", "lists")
		}
		b.Line("  %d. %s segment %s in context %s: %s, from %s", i+1, identOrNone(f.Type), quote(f.Name), ident(f.Context), members, it.FileName)
		if res[i] != nil && res[i].CompatibilityType == upgrade.Warning {
			var missing []string
			for _, sub := range f.SubSegments {
				if sub.Type != upgrade.SegmentPrivate && !slices.ContainsFunc(all.Segments, func(s upgrade.SegmentRecord) bool { return s.ID == sub.ID && s.Context == f.Context }) {
					missing = append(missing, quote(sub.Name)+" ("+sub.ID+")")
				}
			}
			b.Warn("%s: segment %s holds segments this server does not have in context %s (%s): UpGrade imports it without them", it.FileName, quote(f.Name), f.Context, strings.Join(missing, ", "))
		}
		for _, s := range all.Segments {
			if s.Type == upgrade.SegmentPublic && s.Name != f.Name && strings.EqualFold(s.Name, f.Name) && s.Context == f.Context {
				b.Warn("public segment %s (id %s) in context %s differs only in case: two segments with nearly the same name", quote(s.Name), s.ID, s.Context)
			}
		}
	}
	return nil
}

type importedSegment struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Context string `json:"context"`
}

type importedSegments struct {
	Created []importedSegment `json:"created"`
	Refused []string          `json:"refused,omitempty"`
}

func executeImportSegments(ctx context.Context, env Env, p ImportSegmentsParams, _ string) (Outcome, error) {
	pa, err := segmentPortAPI(env.API)
	if err != nil {
		return Outcome{}, err
	}
	items := splitExport(p.Files, true)
	before, err := env.API.Segments(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("reading segments before the import: %w", err)
	}
	// A twin made since the confirmation: UpGrade would import it anyway.
	var twins []string
	for _, it := range items {
		if t := segmentTwin(it, before.Segments); t != nil {
			twins = append(twins, twinRefusal(it, t))
		}
	}
	if len(twins) > 0 {
		return Outcome{}, errors.New(strings.Join(twins, "; "))
	}
	res, err := pa.ImportSegments(ctx, serverFiles(items))
	if err != nil {
		return Outcome{}, err
	}
	out := importedSegments{}
	for i, r := range resultsByName(items, res) {
		if r == nil || r.CompatibilityType == upgrade.Incompatible {
			out.Refused = append(out.Refused, items[i].FileName+": "+segmentReason(r))
		}
	}
	out.Created, err = newSegments(ctx, env.API, before.Segments, time.Time{})
	if err != nil {
		return Outcome{}, fmt.Errorf("the import was answered, but %w", err)
	}
	return Result(out)
}

// newSegments lists the public segments that are not in before (and,
// when since is set, were created since).
func newSegments(ctx context.Context, api SegmentReader, before []upgrade.SegmentRecord, since time.Time) ([]importedSegment, error) {
	all, err := api.Segments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading segments: %w", err)
	}
	out := []importedSegment{}
	for _, s := range all.Segments {
		if slices.ContainsFunc(before, func(o upgrade.SegmentRecord) bool { return o.ID == s.ID }) || !createdSince(s.CreatedAt, since) {
			continue
		}
		out = append(out, importedSegment{ID: s.ID, Name: s.Name, Context: s.Context})
	}
	return out, nil
}

// reconcileImportSegments: a segment of a file's name and context created
// since the import started is that import's.
func reconcileImportSegments(ctx context.Context, env Env, p ImportSegmentsParams, _ string, startedAt time.Time) (Reconciliation, error) {
	made, err := newSegments(ctx, env.API, nil, startedAt)
	if err != nil {
		return Reconciliation{}, err
	}
	names := map[string]bool{}
	for _, it := range splitExport(p.Files, true) {
		var f segmentFile
		if json.Unmarshal(it.obj, &f) == nil {
			names[f.Name+"\x00"+f.Context] = true
		}
	}
	var found []importedSegment
	for _, s := range made {
		if names[s.Name+"\x00"+s.Context] {
			found = append(found, s)
		}
	}
	if len(found) == 0 {
		return Reconciliation{Outcome: OutcomeNotDone, Note: "no segment of the files was created since the import started: it did not happen"}, nil
	}
	raw, _ := json.Marshal(importedSegments{Created: found})
	return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("%d segment(s) of the files were created since the import started", len(found))}, nil
}
