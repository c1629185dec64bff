package cmd

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clipperhouse/displaywidth"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// humanView renders results as kubectl-style tables and "Key: value"
// descriptions. Notes that are not results ("no experiments") go to errOut
// so that stdout stays empty for scripts that count lines.
type humanView struct {
	out, errOut io.Writer
	output      string // text or wide
	width       int    // a table's limit; 0 = none
}

func (v *humanView) table(t Table) error { return t.Write(v.out, v.output, v.width) }

// RenderTable writes a borderless table with a header row, columns
// separated by two spaces and no trailing blanks. Widths are display widths
// (a CJK character or an emoji takes two cells), so columns stay aligned on
// a terminal. It is written here rather than through a table library: the
// one we used spent 2 ms at package init on every command (width caches,
// locale probing), tables or not.
func RenderTable(w io.Writer, header []string, rows [][]string) error {
	// A cell is one line: a newline or tab inside one (a user id, a
	// description) would break every column after it.
	flat := strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ")
	header = flatten(flat, header)
	rows = slices.Clone(rows)
	for i := range rows {
		// Escaped before the cells are measured: data may carry control
		// characters that would move the cursor (terminal-safe text).
		rows[i] = flatten(flat, rows[i])
		for j, c := range rows[i] {
			rows[i][j] = string(safeText([]byte(c)))
		}
	}
	widths := make([]int, len(header))
	measure := func(cells []string) {
		for j, c := range cells {
			if j < len(widths) {
				widths[j] = max(widths[j], displaywidth.String(c))
			}
		}
	}
	measure(header)
	for _, r := range rows {
		measure(r)
	}
	var out strings.Builder
	line := func(cells []string) {
		var b strings.Builder
		for j := range widths {
			c := ""
			if j < len(cells) {
				c = cells[j]
			}
			b.WriteString(c)
			if j < len(widths)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-displaywidth.String(c)+2))
			}
		}
		out.WriteString(strings.TrimRight(b.String(), " "))
		out.WriteByte('\n')
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func flatten(r *strings.Replacer, cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = r.Replace(c)
	}
	return out
}

// describe writes aligned "Key: value" lines; empty values show as "-".
func describe(w io.Writer, pairs [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, p := range pairs {
		v := p[1]
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s:\t%s\n", p[0], v)
	}
	return tw.Flush()
}

func list(items []string) string { return strings.Join(items, ", ") }

func (v *humanView) Health(h HealthInfo) error {
	server := h.URL
	if h.Embedded {
		server += " (embedded simulator)"
	}
	return describe(v.out, [][2]string{
		{"Server", server},
		{"Name", h.Name},
		{"Version", h.Version},
		{"Description", h.Description},
	})
}

func (v *humanView) Contexts(cs []ContextInfo) error {
	t := Table{Columns: []Column{{Header: "CONTEXT"}, {Header: "CONDITIONS", Shrink: true}, {Header: "SITES", Shrink: true},
		{Header: "TARGETS", Shrink: true}, {Header: "GROUP TYPES", Shrink: true}}}
	for _, c := range cs {
		t.Rows = append(t.Rows, []string{c.Name, list(c.Conditions), list(c.Sites), list(c.Targets), list(c.GroupTypes)})
	}
	return v.table(t)
}

func (v *humanView) Context(c ContextInfo) error {
	return describe(v.out, [][2]string{
		{"Context", c.Name},
		{"Conditions", list(c.Conditions)},
		{"Sites", list(c.Sites)},
		{"Targets", list(c.Targets)},
		{"Group types", list(c.GroupTypes)},
	})
}

// formatWeight prints 50 as "50" and 33.3 as "33.3".
func formatWeight(w float64) string { return strconv.FormatFloat(w, 'f', -1, 64) }

// formatTime shortens a server timestamp to minutes in UTC; anything it
// cannot parse is shown as it came.
func formatTime(s string) string {
	if s == "" {
		return ""
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04")
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func (v *humanView) Experiments(list []ExperimentInfo, filtered bool) error {
	if len(list) == 0 {
		if filtered {
			_, err := fmt.Fprintln(v.errOut, "no experiments match the filters")
			return err
		}
		_, err := fmt.Fprintln(v.errOut, "no experiments")
		return err
	}
	// Within 80 columns by default, the name never cut (kubectl's
	// rule): the rest is in -o wide.
	t := Table{Columns: []Column{{Header: "NAME"}, {Header: "ID"}, {Header: "CONTEXT", Shrink: true}, {Header: "STATUS"},
		{Header: "UNIT", Wide: true}, {Header: "CONSISTENCY", Wide: true}, {Header: "CONDITIONS", Shrink: true},
		{Header: "DECISION POINTS", Shrink: true, Wide: true}, {Header: "UPDATED", Wide: true}}}
	for _, e := range list {
		conds := make([]string, len(e.Conditions))
		for i, c := range e.Conditions {
			conds[i] = c.Code + ":" + formatWeight(c.Weight)
		}
		points := make([]string, len(e.DecisionPoints))
		for i, p := range e.DecisionPoints {
			points[i] = readmodel.DecisionPointRef{Site: p.Site, Target: p.Target}.String()
		}
		t.Rows = append(t.Rows, []string{
			e.Name, shortID(e.ID), e.Context, string(e.Status), e.Unit, e.Consistency,
			strings.Join(conds, " "), strings.Join(points, " "), formatTime(e.UpdatedAt),
		})
	}
	return v.table(t)
}

func describeSegment(s upgrade.Segment) string {
	var parts []string
	if len(s.Users) > 0 {
		parts = append(parts, "users "+list(s.Users))
	}
	if len(s.Groups) > 0 {
		gs := make([]string, len(s.Groups))
		for i, g := range s.Groups {
			gs[i] = g.Type + ":" + g.GroupID
		}
		parts = append(parts, "groups "+list(gs))
	}
	if names := s.SegmentNames(); len(names) == 1 {
		parts = append(parts, "segment "+names[0])
	} else if len(names) > 1 {
		parts = append(parts, "segments "+list(names))
	}
	return strings.Join(parts, "; ")
}

func (v *humanView) Experiment(e *upgrade.Experiment) error {
	d := readmodel.DetailsOf(e)
	pairs := [][2]string{
		{"Name", d.Name},
		{"ID", d.ID},
		{"Context", d.Context},
		{"Status", string(d.Status)},
		{"Description", d.Description},
		{"Unit", d.Unit},
		{"Group type", d.GroupType},
	}
	if d.ConditionOrder != "" {
		pairs = append(pairs, [2]string{"Condition order", d.ConditionOrder})
	}
	for _, f := range d.Factors {
		levels := make([]string, len(f.Levels))
		for i, l := range f.Levels {
			levels[i] = l.Name
		}
		pairs = append(pairs, [2]string{"Factor " + f.Name, list(levels)})
	}
	pairs = append(pairs, [][2]string{
		{"Consistency", d.Consistency},
		{"Post rule", d.PostRule},
	}...)
	if d.PostRule == upgrade.PostRuleAssign {
		revert := d.RevertTo
		if revert == "" {
			revert = "default"
		}
		pairs = append(pairs, [2]string{"Revert to", revert})
	}
	pairs = append(pairs,
		[2]string{"Filter mode", d.FilterMode},
		[2]string{"Included", describeSegment(d.Inclusion)},
		[2]string{"Excluded", describeSegment(d.Exclusion)},
		[2]string{"Tags", list(d.Tags)},
		[2]string{"Created", formatTime(d.CreatedAt)},
		[2]string{"Updated", formatTime(d.UpdatedAt)},
	)
	if err := describe(v.out, pairs); err != nil {
		return err
	}
	fmt.Fprintln(v.out)
	rows := make([][]string, 0, len(d.Conditions))
	header := []string{"CONDITION", "WEIGHT", "ID"}
	if d.Design != "" {
		header = []string{"CONDITION", "LEVELS", "WEIGHT", "ID"}
	}
	for _, c := range d.Conditions {
		if d.Design != "" {
			rows = append(rows, []string{c.Code, strings.Join(c.Levels, ", "), formatWeight(c.Weight), c.ID})
			continue
		}
		rows = append(rows, []string{c.Code, formatWeight(c.Weight), c.ID})
	}
	if err := RenderTable(v.out, header, rows); err != nil {
		return err
	}
	fmt.Fprintln(v.out)
	rows = rows[:0]
	for _, p := range d.DecisionPoints {
		excl := "no"
		if p.ExcludeIfReached {
			excl = "yes"
		}
		rows = append(rows, []string{p.Site, p.Target, excl})
	}
	if err := RenderTable(v.out, []string{"SITE", "TARGET", "EXCLUDE IF REACHED"}, rows); err != nil {
		return err
	}
	if h := readmodel.HistoryOf(e); len(h.Changes) > 0 {
		fmt.Fprintln(v.out)
		return historyTable(v.out, h)
	}
	return nil
}

func formatShare(s float64) string { return strconv.FormatFloat(100*s, 'f', 1, 64) + "%" }

func (v *humanView) Stats(s StatsReport, _ *upgrade.EnrollmentStats) error {
	rows := make([][]string, 0, len(s.Conditions)+1)
	for _, c := range s.Conditions {
		rows = append(rows, []string{c.Condition, strconv.Itoa(c.Users), strconv.Itoa(c.Groups), formatShare(c.Share)})
	}
	total := "-"
	if s.Users > 0 {
		total = formatShare(1)
	}
	rows = append(rows, []string{"TOTAL", strconv.Itoa(s.Users), strconv.Itoa(s.Groups), total})
	if err := RenderTable(v.out, []string{"CONDITION", "USERS", "GROUPS", "SHARE"}, rows); err != nil {
		return err
	}
	if len(s.Levels) > 0 {
		fmt.Fprintln(v.out)
		rows = rows[:0]
		for _, l := range s.Levels {
			rows = append(rows, []string{l.Factor, l.Level, strconv.Itoa(l.Users)})
		}
		if err := RenderTable(v.out, []string{"FACTOR", "LEVEL", "USERS"}, rows); err != nil {
			return err
		}
	}
	if s.WithinSubjects {
		fmt.Fprintln(v.out, "\nWithin-subjects: a user counts in every condition they marked, so the conditions add up to more than the total.")
	}
	_, err := fmt.Fprintf(v.out, "\nExcluded: %d users, %d groups\n", s.UsersExcluded, s.GroupsExcluded)
	return err
}

func (v *humanView) Version(i VersionInfo) error {
	_, err := fmt.Fprintln(v.out, i.String())
	return err
}

// String is the one-line form: "upgrade-agent VERSION (COMMIT, GOVERSION)".
func (i VersionInfo) String() string {
	var details []string
	if i.Commit != "" {
		details = append(details, i.Commit)
	}
	details = append(details, i.GoVersion)
	return fmt.Sprintf("upgrade-agent %s (%s)", i.Version, strings.Join(details, ", "))
}
