package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// FlagPortabilityAPI is UpGrade's feature flag import routes, found on
// env.API as PortabilityAPI is.
type FlagPortabilityAPI interface {
	ValidateFlagImport(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error)
	ImportFlags(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error)
}

var _ FlagPortabilityAPI = (*upgrade.Client)(nil)

// ImportFeatureFlags imports feature flags from UpGrade export files.
const ImportFeatureFlags Name = "import_feature_flags"

// ImportFeatureFlagsParams are the params of import_feature_flags.
type ImportFeatureFlagsParams struct {
	Files []ImportFileParam `json:"files" jsonschema:"UpGrade feature flag export files"`
}

// Action implements Params.
func (ImportFeatureFlagsParams) Action() Name { return ImportFeatureFlags }

// declareImportFlags declares this file's action in r.
func declareImportFlags(r *Registry) {
	Add(r, Def[ImportFeatureFlagsParams]{
		Name: ImportFeatureFlags, Order: 180, Object: ObjectFeatureFlag, Invalidates: []Cache{CacheFlags},
		Description: "Import feature flags from UpGrade export files (new disabled flags, new ids).",
		Canonical:   func(p ImportFeatureFlagsParams) ImportFeatureFlagsParams { p.Files = trimFileNames(p.Files); return p },
		Validate:    validateImportFlags,
		Plan:        planImportFlags,
		Execute:     executeImportFlags,
		Reconcile:   reconcileImportFlags,
		Report: ReportAs(func(r importedFlags) string {
			return importedLine("feature flag(s), disabled", r.Created, func(f importedFlag) string {
				return fmt.Sprintf("%q (key %s, id %s, context %s)", f.Name, f.Key, f.ID, f.Context)
			}) + notImported(r.Refused)
		}),
	})
}

// importedLine is the report line of an import: "Imported N what: a, b."
// with each created object described.
func importedLine[T any](what string, created []T, describe func(T) string) string {
	parts := make([]string, len(created))
	for i, c := range created {
		parts[i] = describe(c)
	}
	return fmt.Sprintf("Imported %d %s: %s.", len(created), what, strings.Join(parts, ", "))
}

// notImported is the report's tail naming the files an import refused.
func notImported(refused []string) string {
	if len(refused) == 0 {
		return ""
	}
	return " Not imported: " + strings.Join(refused, "; ") + "."
}

func trimFileNames(files []ImportFileParam) []ImportFileParam {
	out := slices.Clone(files)
	for i := range out {
		out[i].Name = strings.TrimSpace(out[i].Name)
		if out[i].Name == "" {
			out[i].Name = fmt.Sprintf("file%d.json", i+1)
		}
	}
	return out
}

// exportFile is one object of an export file, as sent to the server.
type exportFile struct {
	upgrade.ImportFile
	source string // the file it came from
	obj    json.RawMessage
}

// splitExport makes one server file per object of the files: an array
// becomes NAME#1, NAME#2 (before the extension when forceJSON, since
// UpGrade's segment routes only read names ending in .json, which is then
// added when missing); anything unreadable goes as it is, for the server
// to judge.
func splitExport(files []ImportFileParam, forceJSON bool) []exportFile {
	var out []exportFile
	name := func(f string, i, n int) string {
		base := f
		if forceJSON {
			base = strings.TrimSuffix(f, path.Ext(f))
		}
		if n > 1 {
			base = fmt.Sprintf("%s#%d", base, i+1)
		}
		if forceJSON {
			return base + ".json"
		}
		return base
	}
	for _, f := range files {
		var list []json.RawMessage
		if json.Unmarshal([]byte(f.Content), &list) != nil {
			out = append(out, exportFile{ImportFile: upgrade.ImportFile{FileName: name(f.Name, 0, 1), FileContent: f.Content}, source: f.Name, obj: json.RawMessage(f.Content)})
			continue
		}
		for i, raw := range list {
			out = append(out, exportFile{ImportFile: upgrade.ImportFile{FileName: name(f.Name, i, len(list)), FileContent: string(raw)}, source: f.Name, obj: raw})
		}
	}
	return out
}

func serverFiles(items []exportFile) []upgrade.ImportFile {
	out := make([]upgrade.ImportFile, len(items))
	for i, it := range items {
		out[i] = it.ImportFile
	}
	return out
}

// resultsByName matches the server's answer to the files by name (the
// segment routes answer the files that fail to parse first).
func resultsByName(items []exportFile, res []upgrade.ImportResult) []*upgrade.ImportResult {
	out := make([]*upgrade.ImportResult, len(items))
	for i, it := range items {
		for j := range res {
			if res[j].FileName == it.FileName {
				out[i] = &res[j]
				break
			}
		}
	}
	return out
}

func checkFilesPresent(c *Checker, files []ImportFileParam, what string) bool {
	if len(files) == 0 {
		c.Missing("files", "files are required: UpGrade %s export files", what)
		return false
	}
	for i, f := range files {
		if strings.TrimSpace(f.Content) == "" {
			c.Missing(fmt.Sprintf("files[%d].content", i), "file %q is empty", f.Name)
		}
	}
	return len(c.problems) == 0
}

// flagFile is what a flag export holds that the plan and reasons need.
type flagFile struct {
	Name       string     `json:"name"`
	Key        string     `json:"key"`
	Status     string     `json:"status"`
	FilterMode string     `json:"filterMode"`
	Context    []string   `json:"context"`
	Tags       []string   `json:"tags"`
	Include    []fileList `json:"featureFlagSegmentInclusion"`
	Exclude    []fileList `json:"featureFlagSegmentExclusion"`
}

type fileList struct {
	Enabled  *bool  `json:"enabled"`
	ListType string `json:"listType"`
	Segment  *struct {
		SubSegments []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"subSegments"`
	} `json:"segment"`
}

func (f flagFile) context() string {
	if len(f.Context) == 0 {
		return ""
	}
	return f.Context[0]
}

// flagAPI finds the flag import routes on api.
func flagPortAPI(api any) (FlagPortabilityAPI, error) {
	p, ok := extension[FlagPortabilityAPI](api)
	if !ok {
		return nil, fmt.Errorf("this UpGrade backend (%T) has no feature flag import routes", api)
	}
	return p, nil
}

// validateFlagFiles asks the server about the files: one result per
// file, nil when the server said nothing of it.
func validateFlagFiles(ctx context.Context, api any, files []ImportFileParam) ([]exportFile, []*upgrade.ImportResult, error) {
	p, err := flagPortAPI(api)
	if err != nil {
		return nil, nil, err
	}
	items := splitExport(files, false)
	res, err := p.ValidateFlagImport(ctx, serverFiles(items))
	if err != nil {
		return nil, nil, fmt.Errorf("validating the files with UpGrade: %w", err)
	}
	return items, resultsByName(items, res), nil
}

// flagReason says why UpGrade calls a flag file incompatible: its
// validation answers no reason at all.
func flagReason(it exportFile, items []exportFile, flags []upgrade.FeatureFlag, meta upgrade.ContextMetadata) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(it.obj, &m); err != nil || m == nil {
		return "not a feature flag export: the file is not a JSON object (" + errText(err) + ")"
	}
	var f flagFile
	if err := json.Unmarshal(it.obj, &f); err != nil {
		return "not a feature flag export: " + err.Error()
	}
	for _, o := range items {
		if o.FileName == it.FileName {
			break
		}
		var of flagFile
		if json.Unmarshal(o.obj, &of) == nil && of.Key == f.Key {
			return fmt.Sprintf("key %s is also in %s: UpGrade takes one flag per key from a batch", f.Key, o.FileName)
		}
	}
	var missing []string
	for _, k := range []string{"name", "key", "status", "filterMode", "context", "tags"} {
		if v, ok := m[k]; !ok || string(v) == "null" || string(v) == `""` || string(v) == "[]" && k == "context" {
			missing = append(missing, k)
		}
	}
	// 6.5's validation crashes on a file without the two list arrays
	// and answers {} for it: no verdict, no reason (docs/upgrade-real.md).
	for _, k := range []string{"featureFlagSegmentInclusion", "featureFlagSegmentExclusion"} {
		if v, ok := m[k]; !ok || string(v) == "null" {
			missing = append(missing, k+` (an array, [] when empty)`)
		}
	}
	if len(missing) > 0 {
		return "not a feature flag export: missing " + strings.Join(missing, ", ")
	}
	if !slices.Contains(upgrade.FlagStatuses(), f.Status) {
		return fmt.Sprintf("status %q is not one of %s", f.Status, strings.Join(upgrade.FlagStatuses(), ", "))
	}
	if !slices.Contains(upgrade.FilterModes(), f.FilterMode) {
		return fmt.Sprintf("filterMode %q is not one of %s", f.FilterMode, strings.Join(upgrade.FilterModes(), ", "))
	}
	if _, ok := meta[f.context()]; !ok {
		return fmt.Sprintf("context %q is not one of this server's app contexts (%s)", f.context(), listOrNone(contextNames(meta)))
	}
	for _, o := range flags {
		if o.Key == f.Key && o.ContextName() == f.context() {
			return fmt.Sprintf("feature flag %q (id %s) already has key %s in context %s, and keys are unique per context: change the key in the file, or delete or re-key that flag first", o.Name, o.ID, f.Key, f.context())
		}
	}
	for i, l := range append(slices.Clone(f.Include), f.Exclude...) {
		if l.Enabled == nil || l.ListType == "" || l.Segment == nil {
			return fmt.Sprintf("list %d lacks enabled, listType or segment (each list needs them, its segment a name, context, type and member arrays)", i+1)
		}
	}
	return "UpGrade refuses the file without saying why (each list's segment needs a name, context, type and the arrays individualForSegment, groupForSegment and subSegments)"
}

func errText(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

func validateImportFlags(c *Checker, p ImportFeatureFlagsParams) error {
	if !checkFilesPresent(c, p.Files, "feature flag") {
		return nil
	}
	items, res, err := validateFlagFiles(c.Context(), c.API(), p.Files)
	if err != nil {
		return err
	}
	var flags []upgrade.FeatureFlag
	var meta upgrade.ContextMetadata
	for i, r := range res {
		if r != nil && r.CompatibilityType != upgrade.Incompatible {
			var m map[string]json.RawMessage
			if json.Unmarshal(items[i].obj, &m) == nil {
				if d, ok := m["description"]; !ok || string(d) == "null" {
					c.Add("files", "%q: no description: UpGrade's validation passes it, but its import fails on a flag without one (a 500); add \"description\": \"\" to the file", items[i].FileName)
				}
			}
			continue
		}
		if flags == nil {
			if flags, err = c.API().Flags(c.Context()); err != nil {
				return fmt.Errorf("reading feature flags: %w", err)
			}
			if meta, err = c.metadata(); err != nil {
				return err
			}
		}
		reason := flagReason(items[i], items, flags, meta)
		c.Add("files", "%q: incompatible: %s", items[i].FileName, reason)
	}
	return nil
}

// missingSegmentIDs lists the sub-segment ids of a list that no public
// segment of appContext has.
func missingSegmentIDs(l fileList, segs []upgrade.SegmentRecord, appContext string) []string {
	var out []string
	if l.Segment == nil {
		return nil
	}
	for _, sub := range l.Segment.SubSegments {
		if !slices.ContainsFunc(segs, func(s upgrade.SegmentRecord) bool { return s.ID == sub.ID && s.Context == appContext }) {
			out = append(out, sub.ID)
		}
	}
	return out
}

func planImportFlags(b *Planner, p ImportFeatureFlagsParams) error {
	items, res, err := validateFlagFiles(b.Context(), b.API(), p.Files)
	if err != nil {
		return err
	}
	segs, err := b.API().Segments(b.Context())
	if err != nil {
		return fmt.Errorf("reading segments: %w", err)
	}
	flags, err := b.API().Flags(b.Context())
	if err != nil {
		return fmt.Errorf("reading feature flags: %w", err)
	}
	b.Line("Import %d feature flag(s); each is created disabled, with new ids:", len(items))
	anyInclude := false
	for i, it := range items {
		var f flagFile
		_ = json.Unmarshal(it.obj, &f)
		ctx := f.context()
		dropped, droppedInc := 0, 0
		if res[i] != nil && res[i].CompatibilityType == upgrade.Warning {
			for k, l := range append(slices.Clone(f.Include), f.Exclude...) {
				if len(missingSegmentIDs(l, segs.Segments, ctx)) > 0 {
					dropped++
					if k < len(f.Include) {
						droppedInc++
					}
				}
			}
		}
		anyInclude = anyInclude || len(f.Include) > droppedInc
		b.Line("  %d. %s (key %s) in context %s: filter mode %s, %s, %s, from %s", i+1, quote(f.Name), f.Key, ident(ctx), identOrNone(f.FilterMode),
			plural(len(f.Include), "include list", "include lists"), plural(len(f.Exclude), "exclude list", "exclude lists"), it.FileName)
		if dropped > 0 {
			b.Warn("%s: UpGrade drops %s naming segments this server does not have in context %s", it.FileName, plural(dropped, "list", "lists"), ctx)
		}
		for _, o := range flags {
			if o.Key != f.Key && strings.EqualFold(o.Name, f.Name) && o.ContextName() == ctx {
				b.Warn("a feature flag named %s already exists in context %s (key %s, id %s): UpGrade creates a second one with the same name", quote(o.Name), ctx, o.Key, o.ID)
			}
		}
	}
	if anyInclude {
		b.Line("Include lists come in disabled (UpGrade turns them off on import); exclude lists keep their setting.")
	}
	return nil
}

type importedFlag struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Key     string `json:"key"`
	Context string `json:"context"`
	Status  string `json:"status"`
}

type importedFlags struct {
	Created []importedFlag `json:"created"`
	Refused []string       `json:"refused,omitempty"`
}

func executeImportFlags(ctx context.Context, env Env, p ImportFeatureFlagsParams, _ string) (Outcome, error) {
	pa, err := flagPortAPI(env.API)
	if err != nil {
		return Outcome{}, err
	}
	items := splitExport(p.Files, false)
	before, err := env.API.Flags(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("reading feature flags before the import: %w", err)
	}
	res, err := pa.ImportFlags(ctx, serverFiles(items))
	if err != nil {
		return Outcome{}, err
	}
	out := importedFlags{}
	for i, r := range resultsByName(items, res) {
		if r != nil && r.ErrorText() == upgrade.Incompatible {
			meta, err := env.API.ContextMetadata(ctx)
			if err != nil {
				return Outcome{}, fmt.Errorf("the import was answered, but reading the context metadata: %w", err)
			}
			out.Refused = append(out.Refused, items[i].FileName+": "+flagReason(items[i], items, before, meta))
		}
	}
	out.Created, err = newFlags(ctx, env.API, before, time.Time{})
	if err != nil {
		return Outcome{}, fmt.Errorf("the import was answered, but %w", err)
	}
	return Result(out)
}

// newFlags lists the flags that are not in before (and, when since is
// set, were created since).
func newFlags(ctx context.Context, api FlagReader, before []upgrade.FeatureFlag, since time.Time) ([]importedFlag, error) {
	all, err := api.Flags(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading feature flags: %w", err)
	}
	out := []importedFlag{}
	for _, f := range all {
		if slices.ContainsFunc(before, func(o upgrade.FeatureFlag) bool { return o.ID == f.ID }) || !createdSince(f.CreatedAt, since) {
			continue
		}
		out = append(out, importedFlag{ID: f.ID, Name: f.Name, Key: f.Key, Context: f.ContextName(), Status: f.Status})
	}
	return out, nil
}

func createdSince(at string, since time.Time) bool {
	if since.IsZero() {
		return true
	}
	t, err := time.Parse(time.RFC3339, at)
	return err == nil && !t.Before(since.Add(-time.Second))
}

// reconcileImportFlags: a flag of a file's key and context created since
// the import started is that import's (keys are unique per context).
func reconcileImportFlags(ctx context.Context, env Env, p ImportFeatureFlagsParams, _ string, startedAt time.Time) (Reconciliation, error) {
	made, err := newFlags(ctx, env.API, nil, startedAt)
	if err != nil {
		return Reconciliation{}, err
	}
	keys := map[string]bool{}
	for _, it := range splitExport(p.Files, false) {
		var f flagFile
		if json.Unmarshal(it.obj, &f) == nil {
			keys[f.Key+"\x00"+f.context()] = true
		}
	}
	var found []importedFlag
	for _, f := range made {
		if keys[f.Key+"\x00"+f.Context] {
			found = append(found, f)
		}
	}
	if len(found) == 0 {
		return Reconciliation{Outcome: OutcomeNotDone, Note: "no feature flag of the files was created since the import started: it did not happen"}, nil
	}
	raw, _ := json.Marshal(importedFlags{Created: found})
	return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("%d feature flag(s) of the files were created since the import started", len(found))}, nil
}
