package scenario

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// transcript accumulates the readable record of a run, before
// normalisation.
type transcript struct {
	b strings.Builder
}

func (t *transcript) header(sc *Scenario) {
	fmt.Fprintf(&t.b, "# scenario: %s\n", sc.Name)
	if sc.Description != "" {
		for _, line := range strings.Split(strings.TrimSpace(sc.Description), "\n") {
			fmt.Fprintf(&t.b, "# %s\n", strings.TrimRight(line, " \t"))
		}
	}
	opts := []string{"backend " + sc.Backend}
	if sc.Backend == BackendSim {
		opts[0] += fmt.Sprintf(" (seed %d)", sc.Seed)
	}
	opts = append(opts, "llm "+sc.LLM.String(), "confirm "+sc.Options.Confirm)
	if sc.Options.Yes {
		opts = append(opts, "yes")
	}
	opts = append(opts, "wait_jobs "+sc.Options.WaitJobs.String())
	fmt.Fprintf(&t.b, "# %s\n", strings.Join(opts, ", "))
}

func (t *transcript) setup(sc *Scenario, created []upgrade.Experiment) {
	if len(created) == 0 && len(sc.Setup.Users) == 0 && !sc.Setup.AuthRequired && len(sc.Setup.Flags)+len(sc.Setup.Segments)+len(sc.Setup.Metrics)+len(sc.Setup.Queries) == 0 {
		return
	}
	t.b.WriteString("\nsetup:\n")
	if sc.Setup.AuthRequired {
		t.b.WriteString("  the server demands an admin token the agent does not have\n")
	}
	for _, e := range created {
		var conds, dps []string
		for _, c := range e.Conditions {
			conds = append(conds, fmt.Sprintf("%s:%s", c.ConditionCode, trimNum(c.AssignmentWeight)))
		}
		for _, p := range e.Partitions {
			dps = append(dps, p.Site+"/"+p.Target)
		}
		fmt.Fprintf(&t.b, "  experiment %q %s: %s, %s, %s at %s\n", e.Name, e.ID, e.ContextName(), e.State,
			strings.Join(conds, " "), strings.Join(dps, ", "))
	}
	for _, u := range sc.Setup.Users {
		fmt.Fprintf(&t.b, "  user %s", u.ID)
		if len(u.Group) > 0 {
			fmt.Fprintf(&t.b, " groups %s", compact(u.Group))
		}
		if len(u.WorkingGroup) > 0 {
			fmt.Fprintf(&t.b, " working %s", compact(u.WorkingGroup))
		}
		t.b.WriteString("\n")
	}
}

func trimNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// step renders one step: input, node trace, LLM calls, confirmation,
// actions, job, errors, output, response, status and exit code.
func (t *transcript) step(n int, st Step, input string, o outcome, nodes []string) {
	b := &t.b
	switch st.Kind {
	case StepResume:
		fmt.Fprintf(b, "\n== step %d: %s\n", n, st.Label())
	default:
		fmt.Fprintf(b, "\n== step %d: %s %q\n", n, st.Kind, input)
	}
	res := o.res
	if res != nil {
		fmt.Fprintf(b, "trace: %s\n", orNone(strings.Join(res.Trace, " > ")))
	}
	if len(nodes) > 0 {
		fmt.Fprintf(b, "llm calls: %d (%s)\n", len(nodes), strings.Join(nodes, ", "))
	} else {
		b.WriteString("llm calls: 0\n")
	}
	if res != nil {
		if c := res.Confirmation; c != nil {
			d := ""
			if c.Destructive {
				d = " (destructive)"
			}
			fmt.Fprintf(b, "confirmation: %s%s\n", c.Action, d)
			writeJSON(b, "  params", c.Params)
			if strings.Contains(res.Response, c.Message) {
				// The person reads it in the response; once is enough here.
				b.WriteString("  message: shown verbatim in the response\n")
			} else {
				b.WriteString("  message (NOT in the response):\n")
				writeText(b, "    ", c.Message)
			}
		}
		if len(res.Actions) > 0 {
			b.WriteString("actions:\n")
			for i, a := range res.Actions {
				fmt.Fprintf(b, "  %d. %s: %s\n", i+1, a.Action, a.Status)
				writeJSON(b, "     params", a.Params)
				if len(a.Result) > 0 {
					writeJSON(b, "     result", a.Result)
				}
				if a.Error != "" {
					fmt.Fprintf(b, "     error: %s\n", a.Error)
				}
			}
		}
		if j := res.Job; j != nil {
			fmt.Fprintf(b, "job: %s %s %s", j.ID, j.Action, j.State)
			if j.Progress != nil {
				fmt.Fprintf(b, " (%d of %d)", j.Progress.Done, j.Progress.Total)
			}
			b.WriteString("\n")
		}
		if len(res.Errors) > 0 {
			b.WriteString("errors:\n")
			for _, e := range res.Errors {
				field := ""
				if e.Field != "" {
					field = " (" + e.Field + ")"
				}
				fmt.Fprintf(b, "  - %s%s: %s\n", e.Type, field, oneLine(e.Message))
			}
		}
		if res.Output != nil {
			raw, _ := json.Marshal(res.Output)
			writeJSON(b, "output", raw)
		}
		b.WriteString("response:\n")
		writeText(b, "  ", res.Response)
		if r := res.TerminationReason; r != "" && !defaultReason(res.Status, r) {
			fmt.Fprintf(b, "termination: %s\n", r)
		}
	}
	if o.err != nil {
		fmt.Fprintf(b, "error: %s\n", oneLine(o.err.Error()))
	}
	fmt.Fprintf(b, "status: %s (exit %d)\n", o.status(), o.exitCode)
}

func defaultReason(status pipeline.Status, reason string) bool {
	return reason == pipeline.DefaultReason(status)
}

func (t *transcript) failure(lines []string) {
	t.b.WriteString("FAILED:\n")
	for _, l := range lines {
		fmt.Fprintf(&t.b, "  %s\n", l)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// writeText indents every line; trailing blanks are dropped so golden files
// stay clean.
func writeText(b *strings.Builder, indent, s string) {
	s = strings.TrimRight(s, "\n ")
	if s == "" {
		b.WriteString(indent + "(empty)\n")
		return
	}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString(indent + line + "\n")
	}
}

// writeJSON writes JSON after the label: inline when it fits in 100
// columns, otherwise laid out over several lines, members inline where
// they fit.
func writeJSON(b *strings.Builder, label string, raw json.RawMessage) {
	n, err := parseJSON(raw)
	if err != nil {
		fmt.Fprintf(b, "%s: %s\n", label, oneLine(string(raw)))
		return
	}
	indent := label[:len(label)-len(strings.TrimLeft(label, " "))]
	b.WriteString(label + ": ")
	n.pretty(b, indent, len(label)+2, 100)
	b.WriteString("\n")
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// ---- normalisation ----

var (
	uuidRE     = lazyre.Of(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	timeRE     = lazyre.Of(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`)
	agentIDRE  = lazyre.Of(`\bid-\d{4,}\b`)
	loopbackRE = lazyre.Of(`\b127\.0\.0\.1:\d+`)
)

// normalizer replaces what differs between runs or machines with stable
// placeholders: UUIDs by kind in order of appearance (<exp-1>, <cond-2>,
// <dp-1>, <uuid-1> for unknown ones), the session id, job ids, the
// agent's other ids and RFC 3339 times.
type normalizer struct {
	kinds   map[string]string // lower-case UUID -> exp | cond | dp
	urls    []string          // base URLs of servers, replaced by <upgrade-url>
	session string
	jobs    []string // job ids in order of discovery
}

func newNormalizer() *normalizer { return &normalizer{kinds: map[string]string{}} }

// learn records the kind of every id of the experiments.
func (n *normalizer) learn(es []upgrade.Experiment) {
	for _, e := range es {
		n.kinds[strings.ToLower(e.ID)] = "exp"
		for _, c := range e.Conditions {
			n.kinds[strings.ToLower(c.ID)] = "cond"
		}
		for _, p := range e.Partitions {
			n.kinds[strings.ToLower(p.ID)] = "dp"
		}
	}
}

func (n *normalizer) job(id string) {
	if id == "" {
		return
	}
	for _, j := range n.jobs {
		if j == id {
			return
		}
	}
	n.jobs = append(n.jobs, id)
}

func (n *normalizer) apply(s string) string {
	for _, u := range n.urls {
		if u != "" {
			s = strings.ReplaceAll(s, u, "<upgrade-url>")
		}
	}
	// Any other loopback server (the scripted LLM) listens on a new port
	// each run.
	s = loopbackRE.Get().ReplaceAllString(s, "127.0.0.1:<port>")
	if n.session != "" {
		s = strings.ReplaceAll(s, n.session, "<session>")
	}
	// Longer ids first, so that id-00012 is not read as id-0001 + "2".
	jobs := append([]string(nil), n.jobs...)
	sort.Slice(jobs, func(i, j int) bool { return len(jobs[i]) > len(jobs[j]) })
	for _, j := range jobs {
		s = strings.ReplaceAll(s, j, fmt.Sprintf("<job-%d>", indexOf(n.jobs, j)+1))
	}
	seen := map[string]string{}
	counts := map[string]int{}
	s = uuidRE.Get().ReplaceAllStringFunc(s, func(m string) string {
		key := strings.ToLower(m)
		if p, ok := seen[key]; ok {
			return p
		}
		kind := n.kinds[key]
		if kind == "" {
			kind = "uuid"
		}
		counts[kind]++
		p := fmt.Sprintf("<%s-%d>", kind, counts[kind])
		seen[key] = p
		return p
	})
	ids := map[string]string{}
	s = agentIDRE.Get().ReplaceAllStringFunc(s, func(m string) string {
		if p, ok := ids[m]; ok {
			return p
		}
		p := fmt.Sprintf("<id-%d>", len(ids)+1)
		ids[m] = p
		return p
	})
	return timeRE.Get().ReplaceAllString(s, "<time>")
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
