package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// metricSep joins the parts of a grouped metric's key, as UpGrade stores
// them: group@__@key@__@attribute.
const metricSep = "@__@"

var metricTypes = []string{"continuous", "categorical"}

// metricRow is one stored metric leaf (UpGrade's metric table).
type metricRow struct {
	Key           string   `json:"key"`
	Type          string   `json:"type"`
	AllowedData   []string `json:"allowedData,omitempty"`
	Context       []string `json:"context"`
	CreatedAt     string   `json:"createdAt"`
	UpdatedAt     string   `json:"updatedAt"`
	VersionNumber int      `json:"versionNumber"`
}

func (s *Sim) metricRoute(m string, segs, low []string) func(*call) {
	n := len(segs)
	switch {
	case n == 1 && m == http.MethodGet:
		return func(c *call) { s.handleMetrics(c, "") }
	case n == 2 && low[1] == "save" && m == http.MethodPost:
		return s.handleMetricSave
	case n == 2 && m == http.MethodGet:
		return func(c *call) { s.handleMetrics(c, unescape(segs[1])) }
	case n == 2 && m == http.MethodDelete:
		return func(c *call) { s.handleMetricDelete(c, unescape(segs[1])) }
	}
	return nil
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// metricLeaf is one leaf a save writes, with the allowed values as sent
// (the save answer shows numbers as numbers; reads show text).
type metricLeaf struct {
	key     string
	typ     string
	allowed []any
	hasAll  bool
}

// parseMetricUnits flattens metricUnit[] into leaves, checking each unit
// as the server's MetricUnit validation does.
func parseMetricUnits(units []any, base string, prefix string, ck *checker) []metricLeaf {
	var out []metricLeaf
	for i, u := range units {
		path := fmt.Sprintf("%s[%d]", base, i)
		m, ok := u.(map[string]any)
		if !ok {
			ck.failf(path, "must be an object")
			continue
		}
		if _, isGroup := m["groupClass"]; isGroup {
			g := ck.str(m, path, "groupClass", true)
			keys, _ := ck.array(m, path, "allowedKeys", true)
			attrs, _ := ck.array(m, path, "attributes", false)
			if len(keys) == 0 {
				// A group without keys is a single continuous leaf.
				out = append(out, metricLeaf{key: prefix + g, typ: "continuous"})
				continue
			}
			for _, k := range keys {
				ks, isStr := k.(string)
				if !isStr || ks == "" {
					ck.failf(join(path, "allowedKeys"), "must be non-empty strings")
					continue
				}
				out = append(out, parseMetricUnits(attrs, join(path, "attributes"), prefix+g+metricSep+ks+metricSep, ck)...)
			}
			continue
		}
		if _, isLeaf := m["metric"]; !isLeaf {
			ck.failf(path, "must have metric or groupClass")
			continue
		}
		name := ck.str(m, path, "metric", true)
		typ := ck.enum(m, path, "datatype", metricTypes, true)
		leaf := metricLeaf{key: prefix + name, typ: typ}
		if raw, ok := m["allowedValues"]; ok && raw != nil {
			vs, isArr := raw.([]any)
			if !isArr {
				ck.failf(join(path, "allowedValues"), "must be an array")
			}
			for _, v := range vs {
				switch v.(type) {
				case string, json.Number:
				default:
					ck.failf(join(path, "allowedValues"), "must hold strings or numbers")
				}
			}
			leaf.allowed, leaf.hasAll = vs, true
		}
		out = append(out, leaf)
	}
	return out
}

func (s *Sim) handleMetricSave(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	units, _ := ck.array(m, "", "metricUnit", true)
	ctxRaw, ok := m["context"]
	var ctx []string
	if ctxArr, isArr := ctxRaw.([]any); !ok || !isArr {
		ck.failf("context", "must be an array of strings")
	} else {
		for _, v := range ctxArr {
			sv, isStr := v.(string)
			if !isStr {
				ck.failf("context", "must be an array of strings")
			}
			ctx = append(ctx, sv)
		}
	}
	leaves := parseMetricUnits(units, "metricUnit", "", ck)
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	if ctx == nil {
		ctx = []string{}
	}
	var out []byte
	err := s.mutate(func() (bool, *apiError) {
		now := s.timestamp()
		sent := map[string][]any{}
		roots := []string{}
		for _, l := range leaves {
			row := s.metricLocked(l.key)
			if row == nil {
				row = &metricRow{Key: l.key, CreatedAt: now, VersionNumber: 0}
				s.st.Metrics = append(s.st.Metrics, row)
			}
			row.Type, row.Context, row.UpdatedAt = l.typ, slices.Clone(ctx), now
			row.VersionNumber++
			if l.hasAll {
				row.AllowedData = make([]string, 0, len(l.allowed))
				for _, v := range l.allowed {
					row.AllowedData = append(row.AllowedData, fmt.Sprint(v))
				}
				sent[l.key] = l.allowed
			} else {
				// The server's save leaves the stored allowed data
				// alone but answers the saved document, without it.
				sent[l.key] = nil
			}
			if r := rootOf(l.key); !slices.Contains(roots, r) {
				roots = append(roots, r)
			}
		}
		trees := []any{}
		for _, r := range roots {
			trees = append(trees, s.metricTreeLocked(r, sent))
		}
		b, err := json.Marshal(trees)
		if err != nil {
			return false, storageError(err)
		}
		out = b
		return len(leaves) > 0, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.raw(http.StatusOK, out)
}

func rootOf(key string) string {
	r, _, _ := strings.Cut(key, metricSep)
	return r
}

func (s *Sim) metricLocked(key string) *metricRow {
	for _, m := range s.st.Metrics {
		if m.Key == key {
			return m
		}
	}
	return nil
}

// metricTreeLocked builds the answer tree of one root: interior nodes copy
// type, allowed data and context of their first stored leaf.
func (s *Sim) metricTreeLocked(root string, sent map[string][]any) map[string]any {
	return s.metricNodeLocked(root, root, sent)
}

func (s *Sim) metricNodeLocked(full, name string, sent map[string][]any) map[string]any {
	var first *metricRow
	var childNames []string
	for _, m := range s.st.Metrics {
		if m.Key != full && !strings.HasPrefix(m.Key, full+metricSep) {
			continue
		}
		if first == nil {
			first = m
		}
		if rest, ok := strings.CutPrefix(m.Key, full+metricSep); ok {
			child, _, _ := strings.Cut(rest, metricSep)
			if !slices.Contains(childNames, child) {
				childNames = append(childNames, child)
			}
		}
	}
	if first == nil {
		return nil
	}
	children := []any{}
	for _, ch := range childNames {
		children = append(children, s.metricNodeLocked(full+metricSep+ch, ch, sent))
	}
	var allowed any
	if v, ok := sent[first.Key]; ok {
		allowed = v
	} else if first.AllowedData != nil {
		allowed = first.AllowedData
	}
	return map[string]any{
		"key": name, "children": children, "metadata": map[string]any{"type": first.Type},
		"allowedData": allowed, "context": first.Context,
	}
}

// metricRootsLocked lists the roots in storage order.
func (s *Sim) metricRootsLocked() []string {
	var roots []string
	for _, m := range s.st.Metrics {
		if r := rootOf(m.Key); !slices.Contains(roots, r) {
			roots = append(roots, r)
		}
	}
	return roots
}

func (s *Sim) handleMetrics(c *call, ctx string) {
	var trees []any
	if err := s.view(func() {
		trees = []any{}
		for _, r := range s.metricRootsLocked() {
			t := s.metricTreeLocked(r, nil)
			if ctx != "" {
				cs, _ := t["context"].([]string)
				if !slices.Contains(cs, ctx) {
					continue
				}
			}
			trees = append(trees, t)
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	if ctx != "" && len(trees) == 0 {
		c.fail(&apiError{Status: 404, Name: "Error", Type: typeQueryFailed, Message: "Metrics context not found: " + ctx})
		return
	}
	c.ok(trees)
}

// handleMetricDelete removes a metric and everything below it, with the
// experiment queries that use any of it, and answers the rest of its root.
func (s *Sim) handleMetricDelete(c *call, key string) {
	var out []any
	err := s.mutate(func() (bool, *apiError) {
		gone := func(k string) bool { return k == key || strings.HasPrefix(k, key+metricSep) }
		if !slices.ContainsFunc(s.st.Metrics, func(m *metricRow) bool { return gone(m.Key) }) {
			return false, &apiError{Status: 404, Name: "Error", Type: typeQueryFailed, Message: "Metric key not found: " + key}
		}
		s.st.Metrics = slices.DeleteFunc(s.st.Metrics, func(m *metricRow) bool { return gone(m.Key) })
		s.dropQueriesLocked(gone)
		s.st.Logs = slices.DeleteFunc(s.st.Logs, func(l *logRow) bool { return gone(l.Key) })
		out = []any{}
		if t := s.metricTreeLocked(rootOf(key), nil); t != nil {
			out = append(out, t)
		}
		return true, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}
