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

// KindStratFactor is a stratification factor, by name.
const KindStratFactor = "stratification_factor"

func init() {
	RegisterKind(KindStratFactor, Kind{Read: readStratSnap, Name: stratSnapName, Restore: restoreStrat, Refuse: refuseStrat,
		Recreated: "Its values are uploaded again, one per user, as the change found them.",
		Lost:      "a factor's link to the experiments that stratified by it (they keep their setting, not the link UpGrade made)"})
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
