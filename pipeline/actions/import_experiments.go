package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// PortabilityAPI is UpGrade's export and import routes, found on env.API
// as StratificationAPI is.
type PortabilityAPI interface {
	ExportExperiments(ctx context.Context, ids []string) (json.RawMessage, error)
	ValidateExperimentImport(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error)
	ImportExperiments(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error)
}

var _ PortabilityAPI = (*upgrade.Client)(nil)

func portAPI(api any) (PortabilityAPI, error) {
	p, ok := extension[PortabilityAPI](api)
	if !ok {
		return nil, fmt.Errorf("this UpGrade backend (%T) has no export and import routes", api)
	}
	return p, nil
}

// ImportExperiments imports experiments from UpGrade export files.
const ImportExperiments Name = "import_experiments"

// ImportFileParam is one export file: its name and its JSON text.
type ImportFileParam struct {
	Name    string `json:"name" jsonschema:"file name"`
	Content string `json:"content" jsonschema:"the file's JSON: one experiment or an array" bind:"jsontext"`
}

// ImportExperimentsParams are the params of import_experiments.
type ImportExperimentsParams struct {
	Files []ImportFileParam `json:"files" jsonschema:"UpGrade experiment export files"`
}

// Action implements Params.
func (ImportExperimentsParams) Action() Name { return ImportExperiments }

// declareImportExperiments declares this file's action in r.
func declareImportExperiments(r *Registry) {
	Add(r, Def[ImportExperimentsParams]{
		Name: ImportExperiments, Order: 96, Object: ObjectExperiment, Invalidates: []Cache{CacheExperiments},
		Description: "Import experiments from UpGrade export files (new inactive experiments, new ids).",
		Canonical: func(p ImportExperimentsParams) ImportExperimentsParams {
			for i := range p.Files {
				p.Files[i].Name = strings.TrimSpace(p.Files[i].Name)
			}
			return p
		},
		Validate:  validateImportExperiments,
		Plan:      planImportExperiments,
		Execute:   executeImportExperiments,
		Reconcile: reconcileImportExperiments,
		Report: ReportAs(func(r importResult) string {
			s := importedLine("experiment(s), inactive", r.Created, func(e importedExperiment) string {
				return fmt.Sprintf("%q (id %s, context %s)", e.Name, e.ID, e.Context)
			})
			if len(r.Twins) > 0 {
				s += " Twins of existing names: " + strings.Join(r.Twins, ", ") + "."
			}
			return s
		}),
	})
}

// importItem is one experiment of the files, split as the server takes
// them (one experiment per file).
type importItem struct {
	file    upgrade.ImportFile
	name    string
	context string
	conds   int
	points  int
	// fixes is what importable changed in the file sent.
	fixes importFixes
}

// splitImportFiles makes one server file per experiment: a file holding
// an array of experiments (what `experiments export` writes for several)
// becomes NAME#1, NAME#2, ...; anything unreadable goes as it is, for the
// server to judge.
func splitImportFiles(files []ImportFileParam) []importItem {
	var out []importItem
	for _, f := range files {
		var list []json.RawMessage
		if json.Unmarshal([]byte(f.Content), &list) != nil {
			out = append(out, describeImport(upgrade.ImportFile{FileName: f.Name, FileContent: f.Content}))
			continue
		}
		for i, raw := range list {
			name := f.Name
			if len(list) > 1 {
				name = fmt.Sprintf("%s#%d", f.Name, i+1)
			}
			out = append(out, describeImport(upgrade.ImportFile{FileName: name, FileContent: string(raw)}))
		}
	}
	return out
}

func describeImport(f upgrade.ImportFile) importItem {
	var fixes importFixes
	f.FileContent, fixes = importable(f.FileContent)
	it := importItem{file: f, fixes: fixes}
	var e struct {
		Name       string            `json:"name"`
		Context    []string          `json:"context"`
		Conditions []json.RawMessage `json:"conditions"`
		Partitions []json.RawMessage `json:"partitions"`
	}
	if json.Unmarshal([]byte(f.FileContent), &e) == nil {
		it.name, it.conds, it.points = e.Name, len(e.Conditions), len(e.Partitions)
		if len(e.Context) > 0 {
			it.context = e.Context[0]
		}
	}
	return it
}

// importable makes an experiment file as UpGrade 6.5 can import it, and
// says what it changed (nothing, and content as it came, when the file
// needs nothing or is not an experiment object):
//   - a factorial level payload whose value is null is left out: 6.5
//     exports a level made without a payload as {"type": "string",
//     "value": null}, and its own validation refuses that ("payload.value
//     has failed the following constraints: isString"), so such a
//     factorial would never come back from its export; without it the
//     level imports and reads back as exported;
//   - missing or null queries, and a condition's missing or null
//     levelCombinationElements, become []: 6.5 refuses such a file with an
//     empty error (its import walks both unchecked; files written by hand
//     or by other tools lack them).
//
// Measured on a real 6.5.0 (docs/upgrade-real.md).
func importable(content string) (string, importFixes) {
	var fx importFixes
	var top map[string]json.RawMessage
	if json.Unmarshal([]byte(content), &top) != nil || top == nil {
		return content, fx
	}
	changed := false
	if q, ok := top["queries"]; !ok || string(q) == "null" {
		top["queries"] = json.RawMessage("[]")
		fx.queries = true
		changed = true
	}
	var conds []map[string]json.RawMessage
	if top["conditions"] != nil && json.Unmarshal(top["conditions"], &conds) == nil {
		n := 0
		for _, c := range conds {
			if c == nil {
				continue
			}
			if l, ok := c["levelCombinationElements"]; !ok || string(l) == "null" {
				c["levelCombinationElements"] = json.RawMessage("[]")
				n++
			}
		}
		if n > 0 {
			if b, err := json.Marshal(conds); err == nil {
				top["conditions"], fx.elements, changed = b, n, true
			}
		}
	}
	var factors []map[string]json.RawMessage
	if top["factors"] != nil && json.Unmarshal(top["factors"], &factors) == nil {
		for _, f := range factors {
			var levels []map[string]json.RawMessage
			if f == nil || f["levels"] == nil || json.Unmarshal(f["levels"], &levels) != nil {
				continue
			}
			n := 0
			for _, l := range levels {
				var pl *struct {
					Value json.RawMessage `json:"value"`
				}
				raw, ok := l["payload"]
				if !ok || json.Unmarshal(raw, &pl) != nil || pl == nil {
					continue
				}
				if len(pl.Value) == 0 || string(pl.Value) == "null" {
					delete(l, "payload")
					n++
				}
			}
			if n > 0 {
				if b, err := json.Marshal(levels); err == nil {
					f["levels"], fx.unset = b, fx.unset+n
				}
			}
		}
		if fx.unset > 0 {
			if b, err := json.Marshal(factors); err == nil {
				top["factors"], changed = b, true
			}
		}
	}
	if !changed {
		return content, importFixes{}
	}
	out, err := json.Marshal(top)
	if err != nil {
		return content, importFixes{}
	}
	return string(out), fx
}

// importFixes is what importable changed in one file.
type importFixes struct {
	unset    int  // level payloads without a value left out
	queries  bool // queries added as []
	elements int  // conditions given levelCombinationElements []
}

// lines words the fixes for the plan.
func (fx importFixes) lines() []string {
	var out []string
	if fx.unset > 0 {
		out = append(out, fmt.Sprintf("%d factor level payload(s) without a value are left out of the file sent: UpGrade exports them as null and its own import refuses null; the levels come back without a payload, as exported", fx.unset))
	}
	var added []string
	if fx.queries {
		added = append(added, "queries")
	}
	if fx.elements > 0 {
		added = append(added, fmt.Sprintf("levelCombinationElements of %d condition(s)", fx.elements))
	}
	if len(added) > 0 {
		out = append(out, "added as empty lists, which UpGrade 6.5 needs to import the file (it refuses it with an empty error otherwise): "+strings.Join(added, ", "))
	}
	return out
}

func importFiles(items []importItem) []upgrade.ImportFile {
	out := make([]upgrade.ImportFile, len(items))
	for i, it := range items {
		out[i] = it.file
	}
	return out
}

// verdictReason words a validation result. A file that is not a 6.x
// experiment export (no backendVersion or no factors) says so first:
// UpGrade answers it with an empty error, or with a list of every DTO
// rule the file breaks, which then follows.
func verdictReason(it importItem, r upgrade.ImportResult) string {
	msg := serverReason(r.ErrorText())
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(it.file.FileContent), &m) == nil && m != nil {
		reason := ""
		if _, ok := m["backendVersion"]; !ok {
			reason = "the file has no backendVersion: it is not an UpGrade 6.x experiment export"
		} else if _, ok := m["factors"]; !ok {
			reason = "the file has no factors field: it is not an UpGrade 6.x experiment export"
		}
		switch {
		case reason != "" && msg == "":
			return reason + " (UpGrade refuses it with an empty error)"
		case reason != "":
			return reason + "; UpGrade says: " + msg
		}
	}
	if msg != "" {
		return msg
	}
	return "UpGrade refuses the file without saying why"
}

func validateImport(ctx context.Context, api any, files []ImportFileParam) ([]importItem, []upgrade.ImportResult, error) {
	p, err := portAPI(api)
	if err != nil {
		return nil, nil, err
	}
	items := splitImportFiles(files)
	res, err := p.ValidateExperimentImport(ctx, importFiles(items))
	if err != nil {
		return nil, nil, fmt.Errorf("validating the files with UpGrade: %w", err)
	}
	if len(res) != len(items) {
		return nil, nil, fmt.Errorf("UpGrade validated %d files of %d", len(res), len(items))
	}
	return items, res, nil
}

func validateImportExperiments(c *Checker, p ImportExperimentsParams) error {
	if len(p.Files) == 0 {
		c.Missing("files", "files are required: UpGrade experiment export files")
		return nil
	}
	for i, f := range p.Files {
		if strings.TrimSpace(f.Content) == "" {
			c.Missing(fmt.Sprintf("files[%d].content", i), "file %q is empty", f.Name)
		}
	}
	if len(c.problems) > 0 {
		return nil
	}
	items, res, err := validateImport(c.Context(), c.API(), p.Files)
	if err != nil {
		return err
	}
	for i, r := range res {
		if r.CompatibilityType == upgrade.Incompatible {
			c.Add("files", "%s: incompatible: %s", items[i].file.FileName, verdictReason(items[i], r))
		}
	}
	return nil
}

// twinsOf lists the items whose name an experiment of the same context
// already has (the server would create a twin silently).
func twinsOf(ctx context.Context, api ExperimentAPI, items []importItem) ([]string, error) {
	all, err := api.Experiments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the experiments: %w", err)
	}
	var twins []string
	for _, it := range items {
		for _, e := range all {
			if strings.EqualFold(e.Name, it.name) && e.ContextName() == it.context {
				twins = append(twins, fmt.Sprintf("%q in context %s (existing id %s)", it.name, it.context, e.ID))
				break
			}
		}
	}
	return twins, nil
}

func planImportExperiments(b *Planner, p ImportExperimentsParams) error {
	items, res, err := validateImport(b.Context(), b.API(), p.Files)
	if err != nil {
		return err
	}
	b.Line("Import %d experiment(s); each is created inactive, with new ids:", len(items))
	for i, it := range items {
		note := ""
		if res[i].CompatibilityType == upgrade.Warning {
			note = " (warning: exported by another UpGrade version)"
		}
		b.Line("  %d. %s in context %s: %d conditions, %d decision points, from %s%s", i+1, quote(it.name), ident(it.context), it.conds, it.points, it.file.FileName, note)
		for _, l := range it.fixes.lines() {
			b.Line("     %s", l)
		}
	}
	twins, err := twinsOf(b.Context(), b.API(), items)
	if err != nil {
		return err
	}
	for _, t := range twins {
		b.Warn("an experiment named %s already exists: UpGrade creates a second one with the same name", t)
	}
	return nil
}

type importedExperiment struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Context string `json:"context"`
	State   string `json:"state"`
}

type importResult struct {
	Created []importedExperiment `json:"created"`
	Twins   []string             `json:"twins,omitempty"`
	Refused []string             `json:"refused,omitempty"`
}

func executeImportExperiments(ctx context.Context, env Env, p ImportExperimentsParams, _ string) (Outcome, error) {
	pa, err := portAPI(env.API)
	if err != nil {
		return Outcome{}, err
	}
	items := splitImportFiles(p.Files)
	before, err := env.API.Experiments(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("reading the experiments before the import: %w", err)
	}
	twins, err := twinsOf(ctx, env.API, items)
	if err != nil {
		return Outcome{}, err
	}
	res, err := pa.ImportExperiments(ctx, importFiles(items))
	if err != nil {
		return Outcome{}, err
	}
	out := importResult{Twins: twins}
	for i, r := range res {
		if r.CompatibilityType == upgrade.Incompatible && i < len(items) {
			out.Refused = append(out.Refused, items[i].file.FileName+": "+verdictReason(items[i], r))
		}
	}
	out.Created, err = newExperiments(ctx, env.API, before, time.Time{})
	if err != nil {
		return Outcome{}, fmt.Errorf("the import was answered, but %w", err)
	}
	return Result(out)
}

// newExperiments lists the experiments that are not in before (and, when
// since is set, were created since).
func newExperiments(ctx context.Context, api ExperimentAPI, before []upgrade.Experiment, since time.Time) ([]importedExperiment, error) {
	old := map[string]bool{}
	for _, e := range before {
		old[e.ID] = true
	}
	all, err := api.Experiments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the experiments: %w", err)
	}
	out := []importedExperiment{}
	for _, e := range all {
		if old[e.ID] {
			continue
		}
		if !since.IsZero() {
			at, err := time.Parse(time.RFC3339, e.CreatedAt)
			if err != nil || at.Before(since.Add(-time.Second)) {
				continue
			}
		}
		out = append(out, importedExperiment{ID: e.ID, Name: e.Name, Context: e.ContextName(), State: string(e.State)})
	}
	return out, nil
}

// reconcileImportExperiments: an import is not idempotent (each one makes
// twins), so it is done when experiments of the files' names were created
// since it started.
func reconcileImportExperiments(ctx context.Context, env Env, p ImportExperimentsParams, _ string, startedAt time.Time) (Reconciliation, error) {
	items := splitImportFiles(p.Files)
	made, err := newExperiments(ctx, env.API, nil, startedAt)
	if err != nil {
		return Reconciliation{}, err
	}
	names := map[string]bool{}
	for _, it := range items {
		names[it.name] = true
	}
	var found []importedExperiment
	for _, e := range made {
		if names[e.Name] {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return Reconciliation{Outcome: OutcomeNotDone, Note: "no experiment of the files was created since the import started: it did not happen"}, nil
	}
	raw, _ := json.Marshal(importResult{Created: found})
	return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("%d experiment(s) of the files were created since the import started", len(found))}, nil
}
