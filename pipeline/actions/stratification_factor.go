package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// StratificationAPI is UpGrade's stratification factor routes. It is not
// part of API (every backend of tests would have to grow it): the actions
// ask env.API for it and say so when the backend has none.
type StratificationAPI interface {
	StratificationFactors(ctx context.Context) ([]upgrade.StratificationFactor, error)
	UploadStratification(ctx context.Context, csvText string) ([]upgrade.StratificationRow, error)
	DeleteStratificationFactor(ctx context.Context, factor string) error
}

var _ StratificationAPI = (*upgrade.Client)(nil)

func stratAPI(api any) (StratificationAPI, error) {
	s, ok := extension[StratificationAPI](api)
	if !ok {
		return nil, fmt.Errorf("this UpGrade backend (%T) has no stratification factor routes", api)
	}
	return s, nil
}

// extension finds an optional set of routes (T) on api, or on the API a
// wrapper holds (one with an Underlying method, as the pipeline's turn
// API is).
func extension[T any](api any) (T, bool) {
	for i := 0; i < 8 && api != nil; i++ {
		if t, ok := api.(T); ok {
			return t, true
		}
		u, ok := api.(interface{ Underlying() any })
		if !ok {
			break
		}
		api = u.Underlying()
	}
	var zero T
	return zero, false
}

// stratFactors reads the factors; found is the one named (nil if none).
func stratFactors(ctx context.Context, api any, name string) ([]upgrade.StratificationFactor, *upgrade.StratificationFactor, error) {
	s, err := stratAPI(api)
	if err != nil {
		return nil, nil, err
	}
	all, err := s.StratificationFactors(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the stratification factors: %w", err)
	}
	for i := range all {
		if all[i].Factor == name {
			return all, &all[i], nil
		}
	}
	return all, nil, nil
}

func factorNames(all []upgrade.StratificationFactor) string {
	names := make([]string, len(all))
	for i, f := range all {
		names[i] = f.Factor
	}
	return listOrNone(names)
}

// ---- create_stratification_factor ----

// CreateStratificationFactor uploads users' values of a factor.
const CreateStratificationFactor Name = "create_stratification_factor"

// StratValueParam is one user's value.
type StratValueParam struct {
	UserID string `json:"user_id"`
	Value  string `json:"value"`
}

// CreateStratificationFactorParams are the params of
// create_stratification_factor.
type CreateStratificationFactorParams struct {
	Name   string            `json:"name" jsonschema:"factor name (a CSV column header)"`
	Values []StratValueParam `json:"values" jsonschema:"each user's value: {user_id: value} or [{user_id, value}]" keyed:"user_id,value"`
}

// Action implements Params.
func (CreateStratificationFactorParams) Action() Name { return CreateStratificationFactor }

func (p CreateStratificationFactorParams) canonical() CreateStratificationFactorParams {
	out := CreateStratificationFactorParams{Name: strings.TrimSpace(p.Name)}
	for _, v := range p.Values {
		out.Values = append(out.Values, StratValueParam{UserID: strings.TrimSpace(v.UserID), Value: strings.TrimSpace(v.Value)})
	}
	return out
}

// stratResult is what the stratification actions report.
type stratResult struct {
	Name      string         `json:"name"`
	Users     int            `json:"users"`
	Values    map[string]int `json:"values,omitempty"`
	Deleted   bool           `json:"deleted,omitempty"`
	NewValues int            `json:"new_values,omitempty"`
}

// declareStratificationFactor declares this file's actions and lookup in r.
func declareStratificationFactor(r *Registry) {
	Add(r, Def[CreateStratificationFactorParams]{
		Name: CreateStratificationFactor, Order: 92, Object: ObjectExperiment,
		Description: "Upload users' values of a stratification factor (replaces a user's value).",
		Canonical:   CreateStratificationFactorParams.canonical,
		Validate:    validateStratUpload,
		Plan:        planStratUpload,
		Execute:     executeStratUpload,
		Reconcile:   reconcileStratUpload,
		Report: ReportAs(func(r stratResult) string {
			return fmt.Sprintf("Stratification factor %q now holds %d users (%s).", r.Name, r.Users, fmtCounts(r.Values))
		}),
	})
	Add(r, Def[DeleteStratificationFactorParams]{
		Name: DeleteStratificationFactor, Order: 94, Object: ObjectExperiment, Destructive: true,
		Description: "Delete a stratification factor no experiment uses, with every user's value.",
		Canonical: func(p DeleteStratificationFactorParams) DeleteStratificationFactorParams {
			return DeleteStratificationFactorParams{Name: strings.TrimSpace(p.Name)}
		},
		Validate:  validateStratDelete,
		Plan:      planStratDelete,
		Execute:   executeStratDelete,
		Reconcile: reconcileStratDelete,
		Report: ReportAs(func(r stratResult) string {
			return fmt.Sprintf("Deleted stratification factor %q (%d users' values).", r.Name, r.Users)
		}),
	})
	AddLookup(r, LookupDef[struct{}]{
		Name: "get_stratification_factors", Object: ObjectExperiment,
		Description: "Stratification factors with value counts.",
		Run: func(ctx context.Context, env Env, _ struct{}) (any, error) {
			all, _, err := stratFactors(ctx, env.API, "")
			if err != nil {
				return nil, err
			}
			out := make([]map[string]any, len(all))
			for i, f := range all {
				out[i] = map[string]any{"name": f.Factor, "users": f.Users(), "values": f.FactorValue, "experiment_ids": f.ExperimentIDs}
			}
			return map[string]any{"stratification_factors": out}, nil
		},
	})
}

func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "no values"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func validateStratUpload(c *Checker, p CreateStratificationFactorParams) error {
	switch {
	case p.Name == "":
		c.Missing("name", "name is required: the factor's name")
	case strings.ContainsAny(p.Name, ",\"\r\n"):
		c.Add("name", "factor name %q holds a comma, quote or line break, which UpGrade's CSV cannot carry", p.Name)
	case strings.EqualFold(p.Name, "uuid"):
		c.Add("name", "factor name uuid is the CSV's user column; choose another name")
	}
	if len(p.Values) == 0 {
		c.Missing("values", "values are required: each user's value of the factor, {user_id: value}")
	}
	seen := map[string]int{}
	for i, v := range p.Values {
		f := fmt.Sprintf("values[%d]", i)
		if v.UserID == "" {
			c.Missing(f+".user_id", "user_id is required")
		} else if j, dup := seen[v.UserID]; dup {
			c.Add(f+".user_id", "user %q has two values (also values[%d]); give one", v.UserID, j)
		} else {
			seen[v.UserID] = i
		}
		if v.Value == "" {
			// UpGrade fails the whole upload (500) on a missing cell.
			c.Add(f+".value", "user %q has an empty value; give one (UpGrade refuses a file with an empty cell)", v.UserID)
		} else if strings.ContainsAny(v.Value, ",\"\r\n") || strings.ContainsAny(v.UserID, ",\"\r\n") {
			c.Add(f, "user %q: a comma, quote or line break cannot travel in UpGrade's CSV", v.UserID)
		}
	}
	_, _, err := stratFactors(c.Context(), c.API(), p.Name)
	return err
}

func uploadCounts(p CreateStratificationFactorParams) map[string]int {
	m := map[string]int{}
	for _, v := range p.Values {
		m[v.Value]++
	}
	return m
}

func planStratUpload(b *Planner, p CreateStratificationFactorParams) error {
	_, cur, err := stratFactors(b.Context(), b.API(), p.Name)
	if err != nil {
		return err
	}
	if cur == nil {
		b.Line("Create stratification factor %s with %s (%s).", quote(p.Name), usersValues(len(p.Values)), fmtCounts(uploadCounts(p)))
	} else {
		b.Line("Upload %s of stratification factor %s (%s).", usersValues(len(p.Values)), quote(p.Name), fmtCounts(uploadCounts(p)))
		b.Line("  It holds %d users now (%s); a user uploaded again gets the new value.", cur.Users(), fmtCounts(cur.FactorValue))
		if n := len(cur.ExperimentIDs); n > 0 {
			b.Warn("%d experiment(s) stratify by this factor; UpGrade 6.5 draws them like random ones (no balancing observed)", n)
		}
	}
	b.Line("  Sent as UpGrade's CSV (uuid,%s); users UpGrade does not know are created.", p.Name)
	return nil
}

func executeStratUpload(ctx context.Context, env Env, p CreateStratificationFactorParams, _ string) (Outcome, error) {
	s, err := stratAPI(env.API)
	if err != nil {
		return Outcome{}, err
	}
	rows := make([]upgrade.StratificationRow, len(p.Values))
	for i, v := range p.Values {
		rows[i] = upgrade.StratificationRow{UserID: v.UserID, Value: v.Value}
	}
	text, err := upgrade.StratificationCSV(p.Name, rows)
	if err != nil {
		return Outcome{}, err
	}
	if _, err := s.UploadStratification(ctx, text); err != nil {
		return Outcome{}, err
	}
	_, cur, err := stratFactors(ctx, env.API, p.Name)
	if err != nil {
		return Outcome{}, fmt.Errorf("the upload was answered, but %w", err)
	}
	if cur == nil {
		return Outcome{}, fmt.Errorf("stratification factor %q: the server answered the upload, but does not list the factor", p.Name)
	}
	return Result(stratResult{Name: p.Name, Users: cur.Users(), Values: cur.FactorValue, NewValues: len(p.Values)})
}

// reconcileStratUpload: an upload is a replace, so running it again does
// no harm; it counts as done only when the factor exists.
func reconcileStratUpload(ctx context.Context, env Env, p CreateStratificationFactorParams, _ string, _ time.Time) (Reconciliation, error) {
	_, cur, err := stratFactors(ctx, env.API, p.Name)
	if err != nil {
		return Reconciliation{}, err
	}
	if cur == nil {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("stratification factor %q does not exist: the upload did not happen", p.Name)}, nil
	}
	return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("stratification factor %q exists; whether this upload reached it cannot be told (uploading again replaces the same values)", p.Name)}, nil
}

// ---- delete_stratification_factor ----

// DeleteStratificationFactor deletes a factor.
const DeleteStratificationFactor Name = "delete_stratification_factor"

// DeleteStratificationFactorParams are the params of
// delete_stratification_factor.
type DeleteStratificationFactorParams struct {
	Name string `json:"name" jsonschema:"factor name"`
}

// Action implements Params.
func (DeleteStratificationFactorParams) Action() Name { return DeleteStratificationFactor }

func validateStratDelete(c *Checker, p DeleteStratificationFactorParams) error {
	if p.Name == "" {
		c.Missing("name", "name is required: the factor to delete")
		return nil
	}
	all, f, err := stratFactors(c.Context(), c.API(), p.Name)
	if err != nil {
		return err
	}
	if f == nil {
		c.NotFound("name", "no stratification factor %q; factors: %s", p.Name, factorNames(all))
		return nil
	}
	if len(f.ExperimentIDs) > 0 {
		names, err := experimentNamesOf(c.Context(), c.API(), f.ExperimentIDs)
		if err != nil {
			return err
		}
		c.Add("name", "stratification factor %q is used by %s; UpGrade refuses to delete it (500) until they use another factor or are deleted", p.Name, names)
	}
	return nil
}

// experimentNamesOf names experiments by id: "Math Hints" (id ...).
func experimentNamesOf(ctx context.Context, api ExperimentAPI, ids []string) (string, error) {
	all, err := api.ExperimentNames(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the experiment names: %w", err)
	}
	byID := map[string]string{}
	for _, n := range all {
		byID[n.ID] = n.Name
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("experiment %s (id %s)", quote(byID[id]), id)
	}
	return strings.Join(parts, ", "), nil
}

func planStratDelete(b *Planner, p DeleteStratificationFactorParams) error {
	_, f, err := stratFactors(b.Context(), b.API(), p.Name)
	if err != nil {
		return err
	}
	if f == nil {
		return fmt.Errorf("no stratification factor %q", p.Name)
	}
	b.Line("Delete stratification factor %s.", quote(p.Name))
	b.Line("  Its values for %d users are deleted (%s).", f.Users(), fmtCounts(f.FactorValue))
	return nil
}

func executeStratDelete(ctx context.Context, env Env, p DeleteStratificationFactorParams, _ string) (Outcome, error) {
	s, err := stratAPI(env.API)
	if err != nil {
		return Outcome{}, err
	}
	_, f, err := stratFactors(ctx, env.API, p.Name)
	if err != nil {
		return Outcome{}, err
	}
	if f == nil {
		return Outcome{}, fmt.Errorf("no stratification factor %q", p.Name)
	}
	if err := s.DeleteStratificationFactor(ctx, p.Name); err != nil {
		return Outcome{}, err
	}
	return Result(stratResult{Name: p.Name, Users: f.Users(), Values: f.FactorValue, Deleted: true})
}

func reconcileStratDelete(ctx context.Context, env Env, p DeleteStratificationFactorParams, _ string, _ time.Time) (Reconciliation, error) {
	_, f, err := stratFactors(ctx, env.API, p.Name)
	if err != nil {
		return Reconciliation{}, err
	}
	if f == nil {
		raw, _ := json.Marshal(stratResult{Name: p.Name, Deleted: true})
		return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("stratification factor %q no longer exists: the delete happened", p.Name)}, nil
	}
	return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("stratification factor %q still exists: the delete did not happen", p.Name)}, nil
}

// withStratification sets an experiment's algorithm and factor from the
// design (designOf reads them back, so an update that does not name them
// sends the server's own).
func withStratification(e *upgrade.Experiment, d CreateExperimentParams) {
	e.AssignmentAlgorithm = algorithmName(d.AssignmentAlgorithm)
	e.StratificationFactor = nil
	if d.StratificationFactor != "" {
		e.StratificationFactor = &upgrade.StratificationRef{Name: d.StratificationFactor}
	}
}

// stratification checks the factor of a stratified design: required by
// the agent (UpGrade takes none, and then has nothing to stratify by) and
// existing (UpGrade fails the create with a 500 otherwise).
func (c *Checker) stratification(name string) error {
	all, f, err := stratFactors(c.Context(), c.API(), name)
	if err != nil {
		return err
	}
	switch {
	case name == "":
		c.Missing("stratification_factor", "stratification_factor is required with stratified random sampling; factors: %s", factorNames(all))
	case f == nil:
		c.NotFound("stratification_factor", "no stratification factor %q; factors: %s (upload one with create_stratification_factor)", name, factorNames(all))
	}
	return nil
}

// stratificationLines shows a stratified design's factor and what 6.5
// does with it.
func (b *Planner) stratificationLines(d CreateExperimentParams) {
	if d.AssignmentAlgorithm != upgrade.AlgorithmStratified {
		return
	}
	b.Line("  Assignment algorithm: stratified random sampling by factor %s", quote(d.StratificationFactor))
	b.Warn("UpGrade 6.5 draws stratified experiments like random ones: no balancing across the factor's values was observed")
}

func usersValues(n int) string {
	if n == 1 {
		return "1 user's value"
	}
	return fmt.Sprintf("%d users' values", n)
}
