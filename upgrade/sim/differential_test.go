package sim

// The differential test sends the same request sequences to a real UpGrade
// backend and to the simulator and compares, request by request, the status,
// the shape of the JSON answer (keys and JSON types, recursively) and the
// values each probe names. It runs only when UPGRADE_REAL_URL points at a
// disposable real server (e.g. http://127.0.0.1:3030/api, login disabled);
// CI has none and skips it. docs/simulator.md says how to run one and lists
// the differences that remain on purpose.
//
// The probes isolate themselves: every run has its own id, experiment names
// start with "difftest", users and decision point targets carry the run id,
// and each scenario deletes the experiments it made.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

const diffPrefix = "difftest"

// observation is one probe: what one request (or one derived fact) showed.
type observation struct {
	label  string
	status int    // 0 for a fact
	kind   string // "json", "html", "empty", "text", "fact"
	body   any
	values []string // paths compared by value
	shape  bool
	keep   func(any) any // what of the body is compared (nil: all)
}

// party is one side of the comparison.
type party struct {
	name string
	base string
	hc   *http.Client
	run  string
	scen string
	obs  []observation
	made []string // experiments to delete
	// flags and segments to delete, in the order made
	madeFlags, madeSegs []string
	tb                  testing.TB
}

type answer struct {
	status int
	body   any
	raw    []byte
}

// str reads a string at a path of the answer ("" when absent).
func (a answer) str(path string) string {
	s, _ := lookup(a.body, path).(string)
	return s
}

type callOpt func(*observation, *http.Request)

// values names the paths compared by value.
func values(paths ...string) callOpt {
	return func(o *observation, _ *http.Request) { o.values = append(o.values, paths...) }
}

// as sends the request as a client of user id.
func as(user string) callOpt {
	return func(_ *observation, r *http.Request) {
		if r != nil {
			r.Header.Set("User-Id", user)
		}
	}
}

// noShape compares status and named values only (for answers whose shape
// depends on random draws).
func noShape() callOpt { return func(o *observation, _ *http.Request) { o.shape = false } }

// id derives the same UUID on both sides for a label of this scenario.
func (p *party) id(label string) string {
	return upgrade.IDFrom(p.run + "/" + p.scen + "/" + label)
}

// user names a client user of this run and scenario.
func (p *party) user(n string) string { return fmt.Sprintf("dt-%s-%s-%s", p.run, p.scen, n) }

// target names a decision point target private to this run and scenario,
// so earlier runs' marks and experiments never interfere.
func (p *party) target(n string) string { return fmt.Sprintf("dt-%s-%s-%s", p.run, p.scen, n) }

func (p *party) call(label, method, path string, body any, opts ...callOpt) answer {
	p.tb.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			p.tb.Fatalf("%s: encoding: %v", label, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		p.tb.Fatalf("%s: %v", label, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	o := observation{label: label, shape: true}
	for _, f := range opts {
		f(&o, req)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		p.tb.Fatalf("%s: %s %s on %s: %v", label, method, path, p.name, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		p.tb.Fatalf("%s: reading: %v", label, err)
	}
	a := answer{status: resp.StatusCode, raw: raw}
	o.status = resp.StatusCode
	switch t := strings.TrimSpace(string(raw)); {
	case t == "":
		o.kind = "empty"
	case strings.Contains(resp.Header.Get("Content-Type"), "html"):
		o.kind = "html"
	case json.Valid(raw):
		o.kind = "json"
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		_ = dec.Decode(&a.body)
	default:
		o.kind = "text"
	}
	o.body = a.body
	if path == "/query/analyse" {
		o.body = effectsInOrder(a.body)
	}
	if o.keep != nil {
		o.body = o.keep(a.body)
	}
	p.obs = append(p.obs, o)
	if method == http.MethodPost && a.status == 200 {
		if id := a.str("id"); id != "" {
			switch path {
			case "/experiments":
				p.made = append(p.made, id)
			case "/flags":
				p.madeFlags = append(p.madeFlags, id)
			case "/segments":
				p.madeSegs = append(p.madeSegs, id)
			}
		}
	}
	return a
}

// effectsInOrder sorts the rows of each mainEffect and interactionEffect of
// an analyse answer by their content. The server groups them without ORDER
// BY (LogRepository.analysis), so PostgreSQL's hash aggregate decides their
// order, and two runs on the same data gave two orders: the differential
// compares these lists order-insensitively.
func effectsInOrder(body any) any {
	items, ok := body.([]any)
	if !ok {
		return body
	}
	out := make([]any, len(items))
	for i, it := range items {
		m, isObj := it.(map[string]any)
		if !isObj {
			out[i] = it
			continue
		}
		c := make(map[string]any, len(m))
		for k, v := range m {
			c[k] = v
		}
		for _, k := range []string{"mainEffect", "interactionEffect"} {
			rows, isArr := c[k].([]any)
			if !isArr {
				continue
			}
			rows = slices.Clone(rows)
			key := func(v any) string {
				if _, isStr := v.(string); isStr {
					return "" // "rejected" stays first
				}
				if _, isStr := lookup(v, "participantsLogged").(string); !isStr {
					return "\x02" // the zero-filled rows stay last, in order
				}
				return "\x01" + render(lookup(v, "result")) + "\x00" + render(lookup(v, "participantsLogged")) + "\x00" +
					render(lookup(v, "conditionId")) + render(lookup(v, "levelId"))
			}
			slices.SortStableFunc(rows, func(a, b any) int { return strings.Compare(key(a), key(b)) })
			c[k] = rows
		}
		out[i] = c
	}
	return out
}

// fact records a value derived from earlier answers.
func (p *party) fact(label string, v any) {
	p.obs = append(p.obs, observation{label: label, kind: "fact", body: v, values: []string{""}})
}

// cleanup deletes what this scenario created, unrecorded: experiments,
// flags, then segments (newest first, so parents go after their children).
func (p *party) cleanup() {
	for _, id := range p.made {
		deleteQuietly(p.hc, p.base+"/experiments/"+id)
	}
	for _, id := range p.madeFlags {
		deleteQuietly(p.hc, p.base+"/flags/"+id)
	}
	for i := len(p.madeSegs) - 1; i >= 0; i-- {
		deleteQuietly(p.hc, p.base+"/segments/"+p.madeSegs[i])
	}
	p.made, p.madeFlags, p.madeSegs = nil, nil, nil
}

func deleteQuietly(hc *http.Client, url string) {
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	if resp, err := hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// lookup follows a dotted path ("conditions.0.id"); "#x" is the length of
// the array at x.
func lookup(v any, path string) any {
	if path == "" {
		return v
	}
	if strings.HasPrefix(path, "#") {
		switch a := lookup(v, path[1:]).(type) {
		case []any:
			return len(a)
		case map[string]any:
			return len(a)
		}
		return nil
	}
	for _, part := range strings.Split(path, ".") {
		switch t := v.(type) {
		case map[string]any:
			v = t[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64, int:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff lists where two JSON values differ in keys or types.
func shapeDiff(path string, a, b any) []string {
	ta, tb := jsonType(a), jsonType(b)
	if ta != tb {
		return []string{fmt.Sprintf("%s: %s vs %s", orRoot(path), ta, tb)}
	}
	var out []string
	switch av := a.(type) {
	case map[string]any:
		bv := b.(map[string]any)
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			x, okA := av[k]
			y, okB := bv[k]
			switch {
			case !okA:
				out = append(out, fmt.Sprintf("%s: only on the server", join(path, k)))
			case !okB:
				out = append(out, fmt.Sprintf("%s: only in the simulator", join(path, k)))
			default:
				out = append(out, shapeDiff(join(path, k), x, y)...)
			}
		}
	case []any:
		bv := b.([]any)
		if (len(av) == 0) != (len(bv) == 0) {
			return []string{fmt.Sprintf("%s: %d vs %d elements", orRoot(path), len(av), len(bv))}
		}
		if len(av) == len(bv) && sameSignatures(av, bv) {
			// The same elements in another order: servers do not fix
			// the order of rows they read back.
			return nil
		}
		n := min(len(av), len(bv))
		for i := 0; i < n; i++ {
			out = append(out, shapeDiff(fmt.Sprintf("%s[%d]", orRoot(path), i), av[i], bv[i])...)
		}
	}
	return out
}

// signature is a canonical text of a JSON value's shape.
func signature(v any) string {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range keys {
			b.WriteString(k + ":" + signature(t[k]) + ",")
		}
		b.WriteByte('}')
		return b.String()
	case []any:
		sigs := make([]string, len(t))
		for i, el := range t {
			sigs[i] = signature(el)
		}
		sort.Strings(sigs)
		return "[" + strings.Join(sigs, ",") + "]"
	}
	return jsonType(v)
}

func sameSignatures(a, b []any) bool {
	return signature(a) == signature(b)
}

func orRoot(p string) string {
	if p == "" {
		return "$"
	}
	return p
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// compare lists the differences of one probe (sim first, real second).
func compare(sim, real observation) []string {
	var out []string
	if sim.status != real.status {
		out = append(out, fmt.Sprintf("status %d vs %d", sim.status, real.status))
	}
	if sim.kind != real.kind {
		out = append(out, fmt.Sprintf("body %s vs %s", sim.kind, real.kind))
	} else if sim.kind == "json" && sim.shape {
		out = append(out, shapeDiff("", sim.body, real.body)...)
	}
	for _, p := range sim.values {
		x, y := render(lookup(sim.body, p)), render(lookup(real.body, p))
		if x != y {
			out = append(out, fmt.Sprintf("%s: %s vs %s", orRoot(p), x, y))
		}
	}
	return out
}

type scenario struct {
	name string
	run  func(p *party)
}

func TestDifferentialAgainstRealServer(t *testing.T) {
	realURL := strings.TrimRight(os.Getenv("UPGRADE_REAL_URL"), "/")
	if realURL == "" {
		t.Skip("UPGRADE_REAL_URL not set: no real UpGrade server to compare with (see docs/simulator.md)")
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	meta := realMetadata(t, hc, realURL)
	srv, err := Start(Options{Metadata: meta, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	run := hex.EncodeToString(rb[:])
	removeLeftovers(t, hc, realURL)

	probes, agree := 0, 0
	var report []string
	only := os.Getenv("UPGRADE_DIFF_RUN")
	for _, sc := range slices.Concat(diffScenarios(), flagScenarios(), resultsScenarios(), allDesignScenarios(), portabilityScenarios(), leftoverScenarios(), importScenarios()) {
		if only != "" && !slices.Contains(strings.Split(only, ","), sc.name) {
			continue
		}
		sides := [2]*party{
			{name: "sim", base: srv.URL(), hc: hc, run: run, scen: sc.name, tb: t},
			{name: "real", base: realURL, hc: hc, run: run, scen: sc.name, tb: t},
		}
		for _, p := range sides {
			sc.run(p)
			p.cleanup()
		}
		s, r := sides[0].obs, sides[1].obs
		dumpObservations(t, sc.name, s, r)
		if len(s) != len(r) {
			t.Errorf("%s: %d probes on the simulator, %d on the server", sc.name, len(s), len(r))
		}
		for i := range min(len(s), len(r)) {
			probes++
			diffs := compare(s[i], r[i])
			if len(diffs) == 0 {
				agree++
				continue
			}
			report = append(report, fmt.Sprintf("%s / %s:\n    %s", sc.name, s[i].label, strings.Join(diffs, "\n    ")))
		}
	}
	t.Logf("differential: %d probes, %d agree, %d differ", probes, agree, probes-agree)
	for _, line := range report {
		if knownDifference(line) {
			t.Logf("kept on purpose: %s", line)
			continue
		}
		t.Errorf("differs: %s", line)
	}
}

// knownDifference says whether a reported difference is one the simulator
// keeps on purpose (docs/simulator.md, "What it does not imitate").
func knownDifference(line string) bool {
	for _, k := range keptDifferences {
		if strings.Contains(line, k) {
			return true
		}
	}
	return false
}

// keptDifferences are substrings of report lines for the differences
// listed in docs/simulator.md as kept on purpose.
var keptDifferences = []string{
	"root / GET /api:\n    name:", // the simulator says it is one
}

func realMetadata(t *testing.T, hc *http.Client, base string) upgrade.ContextMetadata {
	t.Helper()
	resp, err := hc.Get(base + "/experiments/contextMetaData")
	if err != nil {
		t.Fatalf("real server at %s: %v", base, err)
	}
	defer resp.Body.Close()
	var out struct {
		ContextMetadata upgrade.ContextMetadata `json:"contextMetadata"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.ContextMetadata) == 0 {
		t.Fatalf("real server at %s: context metadata unreadable (%v)", base, err)
	}
	return out.ContextMetadata
}

// removeLeftovers deletes the experiments, flags and public segments a
// crashed earlier run left behind (their names start with diffPrefix).
func removeLeftovers(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	var names []upgrade.ExperimentName
	getJSON(t, hc, base+"/experiments/names", &names)
	for _, n := range names {
		if strings.HasPrefix(n.Name, diffPrefix) {
			deleteQuietly(hc, base+"/experiments/"+n.ID)
		}
	}
	var flags []struct{ ID, Name string }
	getJSON(t, hc, base+"/flags", &flags)
	for _, f := range flags {
		if strings.HasPrefix(f.Name, diffPrefix) {
			deleteQuietly(hc, base+"/flags/"+f.ID)
		}
	}
	var segs struct {
		SegmentsData []struct{ ID, Name string } `json:"segmentsData"`
	}
	getJSON(t, hc, base+"/segments", &segs)
	var global []struct{ ID, Name string }
	getJSON(t, hc, base+"/segments/global", &global)
	for _, s := range append(segs.SegmentsData, global...) {
		if strings.HasPrefix(s.Name, diffPrefix) {
			deleteQuietly(hc, base+"/segments/"+s.ID)
		}
	}
}

func getJSON(t *testing.T, hc *http.Client, url string, v any) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// dumpObservations writes every answer of both sides to
// $UPGRADE_DIFF_DUMP/<scenario>.json when that variable names a directory,
// for reading a difference in full.
func dumpObservations(t *testing.T, name string, sim, real []observation) {
	dir := os.Getenv("UPGRADE_DIFF_DUMP")
	if dir == "" {
		return
	}
	type row struct {
		Label      string `json:"label"`
		SimStatus  int    `json:"simStatus"`
		RealStatus int    `json:"realStatus"`
		Sim        any    `json:"sim"`
		Real       any    `json:"real"`
	}
	var rows []row
	for i := range max(len(sim), len(real)) {
		var r row
		if i < len(sim) {
			r.Label, r.SimStatus, r.Sim = sim[i].label, sim[i].status, sim[i].body
		}
		if i < len(real) {
			r.Label, r.RealStatus, r.Real = real[i].label, real[i].status, real[i].body
		}
		rows = append(rows, r)
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".json"), b, 0o600)
	}
	if err != nil {
		t.Logf("dump %s: %v", name, err)
	}
}
