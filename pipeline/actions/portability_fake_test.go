package actions

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The fake's stratification routes: one factor, prior, that every fake
// server holds, used by the experiments that name it.

func (f *fakeAPI) StratificationFactors(ctx context.Context) ([]upgrade.StratificationFactor, error) {
	if err := f.enter("StratificationFactors"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := []string{}
	for _, id := range f.order {
		if e := f.exps[id]; e != nil && e.StratificationFactor != nil && e.StratificationFactor.Name == "prior" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return []upgrade.StratificationFactor{{Factor: "prior", FactorValue: map[string]int{"high": 2, "low": 3}, ExperimentIDs: ids}}, nil
}

func (f *fakeAPI) UploadStratification(ctx context.Context, csvText string) ([]upgrade.StratificationRow, error) {
	return nil, f.enter("UploadStratification")
}

func (f *fakeAPI) DeleteStratificationFactor(ctx context.Context, factor string) error {
	return f.enter("DeleteStratificationFactor")
}

// The fake's import routes: a file with backendVersion 6.5.0 is
// compatible, another version a warning, anything else incompatible.

func (f *fakeAPI) ExportExperiments(ctx context.Context, ids []string) (json.RawMessage, error) {
	if err := f.enter("ExportExperiments"); err != nil {
		return nil, err
	}
	var out []*upgrade.Experiment
	for _, id := range ids {
		if e := f.get(id); e != nil {
			out = append(out, e)
		}
	}
	return json.Marshal(out)
}

func (f *fakeAPI) ValidateExperimentImport(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error) {
	if err := f.enter("ValidateExperimentImport"); err != nil {
		return nil, err
	}
	out := make([]upgrade.ImportResult, len(files))
	for i, file := range files {
		out[i] = upgrade.ImportResult{FileName: file.FileName, CompatibilityType: upgrade.Incompatible, Error: new(string)}
		switch {
		case strings.Contains(file.FileContent, `"backendVersion":"6.5.0"`):
			out[i].CompatibilityType, out[i].Error = upgrade.Compatible, nil
		case strings.Contains(file.FileContent, `"backendVersion"`):
			out[i].CompatibilityType, out[i].Error = upgrade.Warning, nil
		}
	}
	return out, nil
}

func (f *fakeAPI) ImportExperiments(ctx context.Context, files []upgrade.ImportFile) ([]upgrade.ImportResult, error) {
	if err := f.enter("ImportExperiments"); err != nil {
		return nil, err
	}
	return f.ValidateExperimentImport(ctx, files)
}

func portabilityPlanCases() []planCase {
	return []planCase{
		{name: "create_stratified", p: create(func(p *CreateExperimentParams) {
			p.AssignmentAlgorithm, p.StratificationFactor = "stratified", "prior"
		})},
		{name: "stratification_upload_new", p: CreateStratificationFactorParams{Name: "grade", Values: []StratValueParam{
			{UserID: "s1", Value: "7"}, {UserID: "s2", Value: "8"}, {UserID: "s3", Value: "7"}}}},
		{name: "stratification_upload_existing", p: CreateStratificationFactorParams{Name: "prior", Values: []StratValueParam{
			{UserID: "s1", Value: "low"}}}},
		{name: "stratification_delete", p: DeleteStratificationFactorParams{Name: "prior"}},
		{name: "duplicate_experiment", p: DuplicateExperimentParams{ExperimentID: mathHintsID, Name: "Math Hints 2"}},
		{name: "import_experiments_twin", p: ImportExperimentsParams{Files: []ImportFileParam{
			{Name: "math.json", Content: `{"name":"Math Hints","context":["assign-prog"],"backendVersion":"6.5.0","factors":[],"conditions":[{},{}],"partitions":[{}]}`},
			{Name: "two.json", Content: `[{"name":"New A","context":["assign-prog"],"backendVersion":"6.4.0","factors":[]},{"name":"New B","context":["mathstream"],"backendVersion":"6.5.0","factors":[]}]`},
		}}},
	}
}
