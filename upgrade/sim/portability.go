package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Experiment export, import validation and import, as 6.5 answers them
// (upgrade-results-designs.md section 12): the export is the full
// experiment; validation says compatible, warning (another
// backendVersion) or incompatible with the reason (UpGrade's is "" for a
// file without backendVersion or factors); import makes every compatible
// or warning file a new inactive experiment with new ids, a twin when the
// name or the id exists.

func (s *Sim) portabilityRoute(m string, segs, low []string) func(*call) {
	switch {
	case len(segs) == 3 && low[0] == "flags" && low[1] == "export" && m == http.MethodGet:
		return func(c *call) { s.handleFlagExport(c, segs[2]) }
	case len(segs) == 3 && low[0] == "segments" && low[1] == "export" && low[2] == "json" && m == http.MethodGet:
		return s.handleSegmentExport
	}
	if len(segs) != 2 || low[0] != "experiments" {
		return nil
	}
	switch {
	case low[1] == "export" && m == http.MethodGet:
		return s.handleExport
	case low[1] == "validation" && m == http.MethodPost:
		return func(c *call) { s.handleImport(c, false) }
	case low[1] == "import" && m == http.MethodPost:
		return func(c *call) { s.handleImport(c, true) }
	}
	return nil
}

func (s *Sim) handleExport(c *call) {
	q := c.r.URL.Query()
	ids := append(q["ids"], q["ids[]"]...)
	if len(ids) == 0 {
		c.fail(&apiError{Status: 400, Name: "BadRequestError", Type: typeIncorrectParam, Message: "Invalid queries, check 'errors' property for more info.", Detail: "ids: required"})
		return
	}
	for _, id := range ids {
		if !upgrade.IsUUID(id) {
			c.fail(&apiError{Status: 400, Name: "BadRequestError", Type: typeIncorrectParam, Message: "Invalid queries, check 'errors' property for more info.", Detail: "ids: each must be a UUID"})
			return
		}
	}
	var items [][]byte
	_ = s.view(func() {
		for _, id := range ids {
			if e := s.idx[id]; e != nil {
				items = append(items, s.renderExport(e))
			}
		}
	})
	c.raw(http.StatusOK, jsonArray(items))
}

// renderExport is one experiment of GET /experiments/export: the single
// read's document, but with the stored state names in state and the state
// time logs (a running experiment exports "enrolling" where its single read
// says "running"; probed on a real 6.5.0, docs/upgrade-real.md).
func (s *Sim) renderExport(e *upgrade.Experiment) []byte {
	if s.legacy {
		return s.render(e, viewSingle)
	}
	m := s.renderObj(e, viewSingle)
	m["state"] = string(e.State)
	m["stateTimeLogs"] = s.logsView(e, false)
	b, err := json.Marshal(m)
	if err != nil {
		return []byte("{}")
	}
	return b
}

type importFile struct {
	FileName    string `json:"fileName"`
	FileContent string `json:"fileContent"`
}

// importVerdict is one file's validation: its result and, when it may be
// imported, the experiment as a create body.
func (s *Sim) importVerdict(f importFile) (obj, []byte) {
	res := obj{"fileName": f.FileName, "error": nil, "compatibilityType": upgrade.Compatible}
	incompatible := func(msg string) (obj, []byte) {
		res["error"], res["compatibilityType"] = msg, upgrade.Incompatible
		return res, nil
	}
	dec := json.NewDecoder(strings.NewReader(f.FileContent))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return incompatible("Invalid JSON")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return incompatible("Invalid JSON")
	}
	if ctx, ok := m["context"]; !ok || ctx == nil {
		// validateExperimentContext reads context[0] of undefined: the
		// rejected check is answered as an empty object (measured on
		// 6.5.0, docs/upgrade-real.md).
		return obj{}, nil
	}
	version, hasVersion := m["backendVersion"].(string)
	delete(m, "id")
	for _, key := range []string{"conditions", "partitions"} {
		items, _ := m[key].([]any)
		for _, it := range items {
			if im, ok := it.(map[string]any); ok {
				delete(im, "twoCharacterId")
			}
		}
	}
	// validateExperimentJSON: the DTO's failures, then the context and
	// the stratification factor; a file whose copy cannot be made (no
	// backendVersion or factors) answers the same text, "" when valid.
	text := importErrorText(checkExperiment(m).fails)
	addText := func(t string) {
		if text != "" {
			text += ", "
		}
		text += t
	}
	ctxs, _ := m["context"].([]any)
	ctxName := "undefined"
	if len(ctxs) > 0 {
		ctxName = fmt.Sprint(ctxs[0])
	}
	if _, known := s.meta[ctxName]; !known || len(ctxs) == 0 {
		addText("The app context \"" + ctxName + "\" is not defined in CONTEXT_METADATA.")
	}
	if sf, _ := m["stratificationFactor"].(map[string]any); sf != nil {
		if name, _ := sf["stratificationFactorName"].(string); name != "" && !s.hasFactor(name) {
			// appended without a separator, as the server does
			text += "Missing Stratification Factor " + name + ". Import Stratification Factor from Participants Menu > Stratification before using it"
		}
	}
	// A real 6.5.0 also refuses, with "", a file whose queries or a
	// condition's levelCombinationElements are missing or null
	// (deduceExperimentDetails walks them unchecked; docs/upgrade-real.md).
	_, hasQueries := m["queries"].([]any)
	walkable := hasQueries
	conds, _ := m["conditions"].([]any)
	for _, c := range conds {
		if cm, ok := c.(map[string]any); ok {
			if _, ok := cm["levelCombinationElements"].([]any); !ok {
				walkable = false
			}
		}
	}
	if _, hasFactors := m["factors"]; !hasVersion || !hasFactors || !walkable || text != "" {
		return incompatible(text)
	}
	m["state"] = string(upgrade.StateInactive)
	if version != s.version {
		res["compatibilityType"] = upgrade.Warning
	}
	body, err := json.Marshal(m)
	if err != nil {
		return incompatible("Invalid JSON")
	}
	return res, body
}

func (s *Sim) hasFactor(name string) bool {
	found := false
	_ = s.view(func() { found = s.stratLocked(name) != nil })
	return found
}

func (s *Sim) handleImport(c *call, write bool) {
	var files []importFile
	dec := json.NewDecoder(bytes.NewReader(c.body))
	if err := dec.Decode(&files); err != nil {
		c.fail(badBody("the body must be an array of {fileName, fileContent}"))
		return
	}
	out := make([]obj, 0, len(files))
	var bodies [][]byte
	for _, f := range files {
		res, body := s.importVerdict(f)
		out = append(out, res)
		bodies = append(bodies, body)
	}
	if !write {
		c.ok(out)
		return
	}
	err := s.mutate(func() (bool, *apiError) {
		changed := false
		for i, body := range bodies {
			if body == nil {
				continue
			}
			if _, aerr := s.createLocked(body); aerr != nil {
				out[i]["error"], out[i]["compatibilityType"] = aerr.Message, upgrade.Incompatible
				continue
			}
			changed = true
		}
		return changed, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

// handleFlagExport answers a flag with its lists; an unknown one is a 404
// in plain text.
func (s *Sim) handleFlagExport(c *call, id string) {
	var out obj
	_ = s.view(func() {
		cat := s.cat()
		if f := cat.flag(id); f != nil {
			out = s.flagWithLists(cat, f)
		}
	})
	if out == nil {
		c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		c.w.WriteHeader(http.StatusNotFound)
		_, _ = c.w.Write([]byte("Feature Flag not found"))
		return
	}
	c.ok(out)
}

// handleSegmentExport answers the segments of ?ids= with their members;
// an unknown id is a 500.
func (s *Sim) handleSegmentExport(c *call) {
	q := c.r.URL.Query()
	ids := append(q["ids"], q["ids[]"]...)
	s.answer(c, func() (any, *apiError) {
		cat := s.cat()
		out := []any{}
		for _, id := range ids {
			sg := cat.segment(id)
			if sg == nil {
				return nil, &apiError{Status: 500, Name: "Error", Type: typeQueryFailed, Message: "Segment not found: " + id}
			}
			full := s.segmentFull(cat, sg)
			if len(ids) > 1 {
				// Several ids are read by getSegmentByIds, which also
				// joins the segment's experiment list rows: null for a
				// segment that is no experiment's list (probed on a
				// real 6.5.0, docs/upgrade-real.md).
				full["experimentSegmentInclusion"], full["experimentSegmentExclusion"] = nil, nil
			}
			out = append(out, full)
		}
		return out, nil
	})
}
