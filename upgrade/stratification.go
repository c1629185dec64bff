package upgrade

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// StratificationFactor is one row of GET /stratification: a factor, how
// many users hold each of its values, and the experiments that stratify
// by it.
type StratificationFactor struct {
	Factor        string         `json:"factor"`
	FactorValue   map[string]int `json:"factorValue"`
	ExperimentIDs []string       `json:"experimentIds"`
}

// Users is the number of users with a value of the factor.
func (f StratificationFactor) Users() int {
	n := 0
	for _, v := range f.FactorValue {
		n += v
	}
	return n
}

// StratificationRef is an experiment's stratificationFactor field.
type StratificationRef struct {
	Name string `json:"stratificationFactorName"`
}

// StratificationRow is one user's value of a factor, as an upload answers
// it.
type StratificationRow struct {
	UserID     string `json:"userId"`
	FactorName string `json:"factorName"`
	Value      string `json:"stratificationFactorValue"`
}

// StratificationCSV is UpGrade's upload format: a header "uuid,FACTOR"
// and one "user,value" line per user, in the order given.
func StratificationCSV(factor string, rows []StratificationRow) (string, error) {
	var b strings.Builder
	w := csv.NewWriter(&b)
	if err := w.Write([]string{"uuid", factor}); err != nil {
		return "", err
	}
	for _, r := range rows {
		if err := w.Write([]string{r.UserID, r.Value}); err != nil {
			return "", err
		}
	}
	w.Flush()
	return b.String(), w.Error()
}

// StratificationFactors lists the factors (GET /stratification), sorted by
// name.
func (c *Client) StratificationFactors(ctx context.Context) ([]StratificationFactor, error) {
	out, err := getArray[StratificationFactor](ctx, c, "/stratification")
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Factor < out[j].Factor })
	return out, nil
}

// UploadStratification uploads one CSV file (POST /stratification): every
// user's value replaces the one held; unknown users are created. Never
// retried.
func (c *Client) UploadStratification(ctx context.Context, csvText string) ([]StratificationRow, error) {
	body := map[string]any{"files": []map[string]string{{"file": csvText}}}
	var raw []any
	if err := c.call(ctx, request{method: http.MethodPost, path: "/stratification", body: body}, &raw); err != nil {
		return nil, err
	}
	// 6.5 answers one list of rows per file; read either nesting.
	var out []StratificationRow
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, y := range x {
				walk(y)
			}
		case map[string]any:
			r := StratificationRow{}
			r.UserID, _ = x["userId"].(string)
			r.FactorName, _ = x["factorName"].(string)
			r.Value, _ = x["stratificationFactorValue"].(string)
			out = append(out, r)
		}
	}
	walk(raw)
	return out, nil
}

// StratificationDownload returns the factor's CSV (GET
// /stratification/download/:factor). An unknown factor is not_found.
func (c *Client) StratificationDownload(ctx context.Context, factor string) (string, error) {
	data, err := c.send(ctx, request{method: http.MethodGet, path: "/stratification/download/" + url.PathEscape(factor), idempotent: true})
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// DeleteStratificationFactor deletes a factor and every user's value of
// it. The server refuses a factor an experiment uses (500) and answers an
// unknown one with 404. Never retried.
func (c *Client) DeleteStratificationFactor(ctx context.Context, factor string) error {
	if strings.TrimSpace(factor) == "" {
		return c.localError(http.MethodDelete, "/stratification/", CategoryValidation, "stratification factor: a name is required")
	}
	var out any
	if err := c.call(ctx, request{method: http.MethodDelete, path: "/stratification/" + url.PathEscape(factor), emptyMeansNull: true}, &out); err != nil {
		return fmt.Errorf("deleting stratification factor %q: %w", factor, err)
	}
	return nil
}
