package sim

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Stratification factors (upgrade-results-designs.md section 9): users'
// values of a factor, uploaded as CSV, listed with counts, downloaded,
// deleted. 6.5 keeps them in user_stratification_factor rows; here a
// factor holds its rows in upload order.

type stratFactor struct {
	Name      string       `json:"name"`
	Rows      []*stratCell `json:"rows"`
	CreatedAt string       `json:"createdAt,omitempty"`
}

type stratCell struct {
	User  string `json:"user"`
	Value string `json:"value"`
}

func (s *Sim) stratLocked(name string) *stratFactor {
	for _, f := range s.st.Strata {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// stratificationRoute picks the handler of a /stratification request.
func (s *Sim) stratificationRoute(m string, segs, low []string) func(*call) {
	if len(segs) == 0 || low[0] != "stratification" {
		return nil
	}
	switch {
	case len(segs) == 1 && m == http.MethodGet:
		return s.handleStratList
	case len(segs) == 1 && m == http.MethodPost:
		return s.handleStratUpload
	case len(segs) == 3 && low[1] == "download" && m == http.MethodGet:
		return func(c *call) { s.handleStratDownload(c, pathValue(segs[2])) }
	case len(segs) == 2 && m == http.MethodDelete:
		return func(c *call) { s.handleStratDelete(c, pathValue(segs[1])) }
	}
	return nil
}

func pathValue(seg string) string {
	if v, err := url.PathUnescape(seg); err == nil {
		return v
	}
	return seg
}

func (s *Sim) handleStratList(c *call) {
	out := []obj{}
	_ = s.view(func() {
		for _, f := range s.st.Strata {
			counts := obj{}
			for _, r := range f.Rows {
				n, _ := counts[r.Value].(int)
				counts[r.Value] = n + 1
			}
			out = append(out, obj{"factor": f.Name, "factorValue": counts, "experimentIds": s.stratUsersLocked(f.Name)})
		}
	})
	c.ok(out)
}

// stratUsersLocked lists the ids of the experiments stratified by name.
func (s *Sim) stratUsersLocked(name string) []string {
	ids := []string{}
	for _, e := range s.st.Experiments {
		if e.StratificationFactor != nil && e.StratificationFactor.Name == name {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// checkStratLocked refuses an experiment naming an unknown factor as the
// database's foreign key does (500).
func (s *Sim) checkStratLocked(e *upgrade.Experiment) *apiError {
	if e.StratificationFactor == nil || e.StratificationFactor.Name == "" {
		e.StratificationFactor = nil
		return nil
	}
	if s.stratLocked(e.StratificationFactor.Name) == nil {
		return &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
			Message: `insert or update on table "experiment" violates foreign key constraint "FK_experiment_stratificationFactor"`}
	}
	return nil
}

func (s *Sim) handleStratUpload(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	files, _ := m["files"].([]any)
	if len(files) == 0 {
		c.fail(badBody("files: must be a non-empty array"))
		return
	}
	var texts []string
	for _, f := range files {
		fm, _ := f.(map[string]any)
		t, ok := fm["file"].(string)
		if !ok {
			c.fail(typeError("Cannot read properties of undefined (reading 'split')"))
			return
		}
		texts = append(texts, t)
	}
	var out []any
	err := s.mutate(func() (bool, *apiError) {
		for _, t := range texts {
			rows, aerr := s.uploadLocked(t)
			if aerr != nil {
				return false, aerr
			}
			out = append(out, rows)
		}
		return true, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

// uploadLocked stores one CSV file: header uuid,FACTOR..., one line per
// user. A re-upload replaces a user's value.
func (s *Sim) uploadLocked(text string) ([]obj, *apiError) {
	r := csv.NewReader(strings.NewReader(strings.ReplaceAll(text, "\r\n", "\n")))
	r.FieldsPerRecord = -1
	lines, err := r.ReadAll()
	if err != nil || len(lines) == 0 || len(lines[0]) < 2 {
		return nil, typeError("Cannot read properties of undefined (reading 'trim')")
	}
	factors := lines[0][1:]
	for _, l := range lines[1:] {
		if len(l) != len(lines[0]) || strings.TrimSpace(l[0]) == "" {
			return nil, typeError("Cannot read properties of undefined (reading 'trim')")
		}
		if len(factors) > 1 && s.st.Users[strings.TrimSpace(l[0])] == nil {
			return nil, &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
				Message: `insert or update on table "user_stratification_factor" violates foreign key constraint`}
		}
	}
	out := []obj{}
	for fi, fname := range factors {
		fname = strings.TrimSpace(fname)
		f := s.stratLocked(fname)
		if f == nil {
			f = &stratFactor{Name: fname, CreatedAt: s.timestamp()}
			s.st.Strata = append(s.st.Strata, f)
		}
		for _, l := range lines[1:] {
			u, v := strings.TrimSpace(l[0]), strings.TrimSpace(l[fi+1])
			if s.st.Users[u] == nil {
				s.st.Users[u] = &user{}
			}
			found := false
			for _, cell := range f.Rows {
				if cell.User == u {
					cell.Value, found = v, true
				}
			}
			if !found {
				f.Rows = append(f.Rows, &stratCell{User: u, Value: v})
			}
			out = append(out, obj{"userId": u, "factorName": fname, "stratificationFactorValue": v,
				"user": obj{"id": u}, "stratificationFactor": obj{"stratificationFactorName": fname}})
		}
	}
	return out, nil
}

func (s *Sim) handleStratDownload(c *call, name string) {
	var rows []*stratCell
	found := false
	_ = s.view(func() {
		if f := s.stratLocked(name); f != nil {
			found = true
			rows = append(rows, f.Rows...)
		}
	})
	if !found {
		c.fail(&apiError{Status: 404, Name: "NotFoundError", Message: fmt.Sprintf("Stratification factor %s not found", name)})
		return
	}
	lines := []string{"uuid," + name}
	for _, r := range rows {
		lines = append(lines, r.User+","+r.Value)
	}
	c.w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write([]byte(strings.Join(lines, "\r\n")))
}

func (s *Sim) handleStratDelete(c *call, name string) {
	var out obj
	err := s.mutate(func() (bool, *apiError) {
		f := s.stratLocked(name)
		if f == nil {
			return false, &apiError{Status: 404, Name: "NotFoundError", Message: fmt.Sprintf("Stratification factor %s not found", name)}
		}
		if ids := s.stratUsersLocked(name); len(ids) > 0 {
			return false, &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
				Message: `update or delete on table "stratification_factor" violates foreign key constraint on table "experiment"`}
		}
		for i, g := range s.st.Strata {
			if g == f {
				s.st.Strata = append(s.st.Strata[:i], s.st.Strata[i+1:]...)
				break
			}
		}
		// The server answers the deleted row with its metadata.
		at := f.CreatedAt
		if at == "" {
			at = s.timestamp()
		}
		out = obj{"stratificationFactorName": name, "createdAt": at, "updatedAt": at, "versionNumber": 1}
		return true, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

// stratView is an experiment's stratificationFactor as the single read
// shows it.
func stratView(e *upgrade.Experiment) any {
	if e.StratificationFactor == nil {
		return nil
	}
	return obj{"stratificationFactorName": e.StratificationFactor.Name}
}

// stratRowView is the factor row as the single read joins it, with its
// metadata.
func (s *Sim) stratRowView(e *upgrade.Experiment) any {
	if e.StratificationFactor == nil {
		return nil
	}
	m := obj{"stratificationFactorName": e.StratificationFactor.Name}
	if f := s.stratLocked(e.StratificationFactor.Name); f != nil && f.CreatedAt != "" {
		m["createdAt"], m["updatedAt"], m["versionNumber"] = f.CreatedAt, f.CreatedAt, 1
	}
	return m
}
