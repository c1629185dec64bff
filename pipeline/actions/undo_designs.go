package actions

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// How undo puts back an experiment's queries, a duplicated experiment and
// stratification factors (spec/undo.md's table). Queries live in their
// experiment: the experiment's undo writes its before state back, queries
// included.

// Kinds of changed objects.
const (
	// KindStratFactor is a stratification factor, by name.
	KindStratFactor = "stratification_factor"
	// KindImported is the experiments one import created, by their ids
	// joined with commas.
	KindImported = "imported_experiments"
)

// declareUndoDesigns registers this file's undo kinds and tracking (not per registry).
func declareUndoDesigns(*Registry) {
	RegisterKind(KindStratFactor, Kind{Read: readStratSnap, Name: stratSnapName, Restore: restoreStrat, Refuse: refuseStrat,
		Recreated: "Its values are uploaded again, one per user, as the change found them.",
		Lost:      "a factor's link to the experiments that stratified by it (they keep their setting, not the link UpGrade made)"})
	RegisterKind(KindImported, Kind{Read: readImportedSnap, Name: importedName, Restore: restoreImported,
		Refuse: func(_, _ json.RawMessage) string { return "" }, Normal: normalImported})
	Track(ImportExperiments, Tracking{Kind: KindImported, ResultID: func(raw json.RawMessage) string {
		var r importResult
		_ = json.Unmarshal(raw, &r)
		ids := make([]string, len(r.Created))
		for i, e := range r.Created {
			ids[i] = e.ID
		}
		return strings.Join(ids, ",")
	}})
	for name, t := range map[Name]Tracking{
		AddExperimentQuery:         {Kind: KindExperiment, IDParam: "experiment_id"},
		RemoveExperimentQuery:      {Kind: KindExperiment, IDParam: "experiment_id"},
		DuplicateExperiment:        {Kind: KindExperiment},
		CreateStratificationFactor: {Kind: KindStratFactor, IDParam: "name"},
		DeleteStratificationFactor: {Kind: KindStratFactor, IDParam: "name"},
	} {
		Track(name, t)
	}
}

// stratSnap is a factor with every user's value (the download), so that a
// deleted factor can be uploaded again.
type stratSnap struct {
	Factor      string         `json:"factor"`
	FactorValue map[string]int `json:"factorValue"`
	Experiments []string       `json:"experimentIds,omitempty"`
	Rows        []stratRow     `json:"rows"`
}

type stratRow struct {
	UserID string `json:"user_id"`
	Value  string `json:"value"`
}

// stratDownloader is the optional route that lists each user's value.
type stratDownloader interface {
	StratificationDownload(ctx context.Context, factor string) (string, error)
}

func stratSnapName(obj json.RawMessage) string {
	var s stratSnap
	_ = json.Unmarshal(obj, &s)
	return s.Factor
}

func readStratSnap(ctx context.Context, env Env, name string) (json.RawMessage, error) {
	_, f, err := stratFactors(ctx, env.API, name)
	if err != nil || f == nil {
		return nil, err
	}
	s := stratSnap{Factor: f.Factor, FactorValue: f.FactorValue, Experiments: f.ExperimentIDs, Rows: []stratRow{}}
	if d, ok := extension[stratDownloader](env.API); ok {
		text, err := d.StratificationDownload(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("downloading the factor's values: %w", err)
		}
		if s.Rows, err = parseStratCSV(text); err != nil {
			return nil, fmt.Errorf("reading the factor's values: %w", err)
		}
	}
	return snapshot(s)
}

// parseStratCSV reads a download: a header and one "user,value" line per
// user, sorted by user.
func parseStratCSV(text string) ([]stratRow, error) {
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		return nil, err
	}
	rows := []stratRow{}
	for i, r := range recs {
		if i == 0 || len(r) < 2 {
			continue
		}
		rows = append(rows, stratRow{UserID: r[0], Value: r[1]})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].UserID < rows[j].UserID })
	return rows, nil
}

// refuseStrat: UpGrade does not delete a factor an experiment uses.
func refuseStrat(want, now json.RawMessage) string {
	if want != nil || now == nil {
		return ""
	}
	var n stratSnap
	if json.Unmarshal(now, &n) == nil && len(n.Experiments) > 0 {
		return fmt.Sprintf("stratification factor %q is used by %d experiment(s): UpGrade does not delete it while they do", n.Factor, len(n.Experiments))
	}
	return ""
}

func restoreStrat(ctx context.Context, env Env, name string, want, now json.RawMessage) (string, error) {
	s, err := stratAPI(env.API)
	if err != nil {
		return name, err
	}
	if want == nil {
		return name, s.DeleteStratificationFactor(ctx, name)
	}
	var w stratSnap
	if err := json.Unmarshal(want, &w); err != nil {
		return name, fmt.Errorf("reading the recorded factor: %w", err)
	}
	if len(w.Rows) == 0 {
		return name, fmt.Errorf("stratification factor %q: the change holds no user values to upload again", name)
	}
	if now != nil {
		// An upload adds and replaces values; users uploaded since keep
		// theirs unless the factor is deleted first.
		var n stratSnap
		if json.Unmarshal(now, &n) == nil && len(n.Experiments) == 0 {
			if err := s.DeleteStratificationFactor(ctx, name); err != nil {
				return name, fmt.Errorf("clearing the factor's values: %w", err)
			}
		}
	}
	rows := make([]upgrade.StratificationRow, len(w.Rows))
	for i, r := range w.Rows {
		rows[i] = upgrade.StratificationRow{UserID: r.UserID, Value: r.Value}
	}
	text, err := upgrade.StratificationCSV(w.Factor, rows)
	if err != nil {
		return name, err
	}
	if _, err := s.UploadStratification(ctx, text); err != nil {
		return name, fmt.Errorf("uploading the factor's values again: %w", err)
	}
	return name, nil
}

// readImportedSnap reads the experiments an import created that are still
// there (null when none is).
func readImportedSnap(ctx context.Context, env Env, ids string) (json.RawMessage, error) {
	var out []json.RawMessage
	for _, id := range strings.Split(ids, ",") {
		e, err := readExperimentSnap(ctx, env, id)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return snapshot(out)
}

func importedName(obj json.RawMessage) string {
	var es []json.RawMessage
	_ = json.Unmarshal(obj, &es)
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = snapName(e)
	}
	return strings.Join(names, ", ")
}

func normalImported(obj json.RawMessage) json.RawMessage {
	var es []json.RawMessage
	if obj == nil || json.Unmarshal(obj, &es) != nil {
		return obj
	}
	for i, e := range es {
		es[i] = normalExperiment(e)
	}
	return mustSnap(es)
}

// restoreImported deletes the imported experiments still there: an
// import's before is nothing.
func restoreImported(ctx context.Context, env Env, ids string, want, now json.RawMessage) (string, error) {
	if want != nil {
		return ids, fmt.Errorf("an import's undo only deletes what it created")
	}
	var es []upgrade.Experiment
	if err := json.Unmarshal(now, &es); err != nil {
		return ids, fmt.Errorf("reading the imported experiments: %w", err)
	}
	for _, e := range es {
		if _, err := env.API.DeleteExperiment(ctx, e.ID); err != nil && !isNotFound(err) {
			return ids, fmt.Errorf("deleting imported experiment %q: %w", e.Name, err)
		}
	}
	return ids, nil
}
