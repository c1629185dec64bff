package upgrade

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveExperiment(t *testing.T) {
	list := []ExperimentName{
		{ID: "3f2a1b2c-0000-4000-8000-000000000001", Name: "Math Hints"},
		{ID: "3f2a9999-0000-4000-8000-000000000002", Name: "Math Hints v2"},
		{ID: "a1b2c3d4-0000-4000-8000-000000000003", Name: "Reading"},
		{ID: "b0000000-0000-4000-8000-000000000004", Name: "twin"},
		{ID: "b0000000-0000-4000-8000-000000000005", Name: "twin"},
		{ID: "c0000000-0000-4000-8000-000000000006", Name: "Case"},
		{ID: "c0000000-0000-4000-8000-000000000007", Name: "case"},
	}
	tests := []struct {
		ref        string
		want       string
		candidates []string // ids; nil with wantErr = no match
		wantErr    bool
	}{
		{ref: "a1b2c3d4-0000-4000-8000-000000000003", want: list[2].ID},
		{ref: "Math Hints", want: list[0].ID},       // exact name beats the longer name it prefixes
		{ref: "  Math Hints v2 ", want: list[1].ID}, // spaces around are ignored
		{ref: "reading", want: list[2].ID},          // case-insensitive exact name
		{ref: "Read", want: list[2].ID},             // unique name prefix
		{ref: "rea", want: list[2].ID},              // prefix, any case
		{ref: "a1b2c3d4", want: list[2].ID},         // the 8-char ID column of "list"
		{ref: "a1b2", want: list[2].ID},             // id prefix of four characters
		{ref: "Case", want: list[5].ID},             // exact case wins over the case-insensitive twin
		{ref: "math", wantErr: true, candidates: []string{list[0].ID, list[1].ID}},
		{ref: "3f2a", wantErr: true, candidates: []string{list[0].ID, list[1].ID}},
		{ref: "twin", wantErr: true, candidates: []string{list[3].ID, list[4].ID}},
		{ref: "CASE", wantErr: true, candidates: []string{list[5].ID, list[6].ID}},
		{ref: "a1b", wantErr: true}, // id prefixes shorter than four do not count
		{ref: "nothing", wantErr: true},
		{ref: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := ResolveExperiment(list, tt.ref)
			if !tt.wantErr {
				if err != nil || got != tt.want {
					t.Fatalf("ResolveExperiment(%q) = %q, %v; want %q", tt.ref, got, err, tt.want)
				}
				return
			}
			var re *RefError
			if !errors.As(err, &re) {
				t.Fatalf("ResolveExperiment(%q) = %q, %v; want a *RefError", tt.ref, got, err)
			}
			var ids []string
			for _, c := range re.Candidates {
				ids = append(ids, c.ID)
			}
			if diff := cmp.Diff(tt.candidates, ids); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefErrorMessages(t *testing.T) {
	none := &RefError{Ref: "zz"}
	if got, want := none.Error(), `no experiment matches "zz"`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	two := &RefError{Ref: "m", Candidates: []ExperimentName{{ID: "id1", Name: "m1"}, {ID: "id2", Name: "m2"}}}
	want := "\"m\" matches 2 experiments; use the full name or the id:\n  id1  m1\n  id2  m2"
	if got := two.Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
