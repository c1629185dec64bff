package upgrade

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// Moving designs between servers (upgrade-results-designs.md section 12):
// export, validation of files to import, import.

// ImportFile is one file sent to a validation or import route.
type ImportFile struct {
	FileName    string `json:"fileName"`
	FileContent string `json:"fileContent"`
}

// ImportResult is the server's word on one file. Error is "" or absent
// when there is none; UpGrade answers some incompatible files with an
// empty error, and a file without context with {} (read as incompatible,
// without a file name).
type ImportResult struct {
	FileName          string  `json:"fileName"`
	Error             *string `json:"error"`
	CompatibilityType string  `json:"compatibilityType"`
}

// Compatibility types of the validation routes.
const (
	Compatible   = "compatible"
	Warning      = "warning"
	Incompatible = "incompatible"
)

// ExportExperiments returns the full experiments (GET
// /experiments/export?ids=...), as the server wrote them: an array, []
// for unknown ids.
func (c *Client) ExportExperiments(ctx context.Context, ids []string) (json.RawMessage, error) {
	q := url.Values{}
	for _, id := range ids {
		q.Add("ids", id)
	}
	var out json.RawMessage
	if err := c.call(ctx, request{method: http.MethodGet, path: "/experiments/export?" + q.Encode(), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ValidateExperimentImport asks the server what importing files would do
// (POST /experiments/validation). It only reads, so it is retried.
func (c *Client) ValidateExperimentImport(ctx context.Context, files []ImportFile) ([]ImportResult, error) {
	return c.importCall(ctx, "/experiments/validation", files, true)
}

// ImportExperiments imports files (POST /experiments/import): every
// compatible and warning file becomes a new inactive experiment with new
// ids, a twin when the name exists. Never retried.
func (c *Client) ImportExperiments(ctx context.Context, files []ImportFile) ([]ImportResult, error) {
	return c.importCall(ctx, "/experiments/import", files, false)
}

func (c *Client) importCall(ctx context.Context, path string, files []ImportFile, idempotent bool) ([]ImportResult, error) {
	out := []ImportResult{}
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: files, idempotent: idempotent}, &out); err != nil {
		return nil, err
	}
	for i := range out {
		// A file whose check threw (no context) is answered {} by 6.5.0:
		// neither compatible nor a warning, so it is not imported.
		if out[i].CompatibilityType == "" {
			out[i].CompatibilityType = Incompatible
		}
	}
	return out, nil
}

// ErrorText is the result's error, "" when none.
func (r ImportResult) ErrorText() string {
	if r.Error == nil {
		return ""
	}
	return strings.TrimSpace(*r.Error)
}

// ExportFlag returns a flag with its lists as the server exports it (GET
// /flags/export/:id); an unknown flag is not_found.
func (c *Client) ExportFlag(ctx context.Context, id string) (json.RawMessage, error) {
	var out json.RawMessage
	if err := c.call(ctx, request{method: http.MethodGet, path: "/flags/export/" + url.PathEscape(id), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ExportSegments returns public segments with their members (GET
// /segments/export/json?ids=...).
func (c *Client) ExportSegments(ctx context.Context, ids []string) (json.RawMessage, error) {
	q := url.Values{}
	for _, id := range ids {
		q.Add("ids", id)
	}
	var out json.RawMessage
	if err := c.call(ctx, request{method: http.MethodGet, path: "/segments/export/json?" + q.Encode(), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// importBody is the body of the flag import routes: {files: [...]}.
type importBody struct {
	Files []ImportFile `json:"files"`
}

// ValidateFlagImport asks the server what importing flag files would do
// (POST /flags/import/validation {files}): a compatibilityType per file
// and no reason.
func (c *Client) ValidateFlagImport(ctx context.Context, files []ImportFile) ([]ImportResult, error) {
	out := []ImportResult{}
	err := c.call(ctx, request{method: http.MethodPost, path: "/flags/import/validation", body: importBody{Files: files}, idempotent: true}, &out)
	return out, err
}

// ImportFlags imports flag files (POST /flags/import {files}): every file
// that is not incompatible becomes a new disabled flag with new ids. The
// answer's error is null or "incompatible". Never retried.
func (c *Client) ImportFlags(ctx context.Context, files []ImportFile) ([]ImportResult, error) {
	out := []ImportResult{}
	err := c.call(ctx, request{method: http.MethodPost, path: "/flags/import", body: importBody{Files: files}}, &out)
	return out, err
}

// ValidateSegmentImport asks the server what importing segment files
// would do (POST /segments/import/validation): a result per .json file,
// with the reason.
func (c *Client) ValidateSegmentImport(ctx context.Context, files []ImportFile) ([]ImportResult, error) {
	return c.importCall(ctx, "/segments/import/validation", files, true)
}

// ImportSegments imports segment files (POST /segments/import): new ids;
// a file the validation calls incompatible for its name, context or group
// types is imported all the same. Never retried.
func (c *Client) ImportSegments(ctx context.Context, files []ImportFile) ([]ImportResult, error) {
	return c.importCall(ctx, "/segments/import", files, false)
}
