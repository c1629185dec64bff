package actions

import (
	"context"
	"sort"

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
	}
}
