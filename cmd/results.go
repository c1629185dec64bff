package cmd

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// resultsWidth is the width the results fit when stdout is not a
// terminal: results are read by people, also in a pasted log.
const resultsWidth = 80

// NewCmdExperimentsResults builds "experiments results REF".
func NewCmdExperimentsResults(f *Factory, runF func(context.Context, *ExperimentRefOptions) error) *cobra.Command {
	c := newRefCmd(f, "results", "Show every query of one experiment per condition, with intervals and the sample-ratio check", `  upgrade-agent experiments results "Math Hints"
  upgrade-agent experiments results math -o json`, runF, runExperimentsResults)
	c.Long += `

For each query: N (enrolled users with a value), the value UpGrade computes,
a 95% interval where the numbers allow one (proportions: Wilson; means: when
the experiment also has a stddev query on the same metric), and the
difference against the first condition with its interval. Fewer than 30 users
with a value in a condition is shown as too little data. Then the enrollment
split and the sample-ratio check (chi-square; p < 0.001 is a warning).`
	return withOutputs(c, "json", "yaml")
}

func runExperimentsResults(ctx context.Context, opts *ExperimentRefOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	e, err := fetchExperiment(ctx, client, opts.Ref)
	if err != nil {
		return err
	}
	in, err := client.ReadResults(ctx, e.ID)
	if err != nil {
		return err
	}
	res, err := readmodel.ResultsOf(in.Experiment, in.Analyses, in.Stats, readmodel.EditedWhileEnrolling(in.Experiment, in.Audit))
	if err != nil {
		return err
	}
	if opts.Output == "json" || opts.Output == "yaml" {
		return WriteData(opts.IO.Out, opts.Output, res)
	}
	return writeResults(opts.IO.Out, res, tableWidth(opts.IO.Width))
}

func writeResults(w io.Writer, r readmodel.Results, width int) error {
	fmt.Fprintf(w, "%s (%s)\n", r.ExperimentName, r.Status.Display())
	if len(r.Queries) == 0 {
		fmt.Fprintln(w, "\nNo queries: add one to measure a metric per condition.")
	}
	for _, q := range r.Queries {
		fmt.Fprintf(w, "\n%s\n", queryTitle(q))
		t := Table{Columns: []Column{{Header: "CONDITION", Shrink: true}, {Header: "N"}, {Header: "VALUE"},
			{Header: "INTERVAL"}, {Header: "VS FIRST"}}}
		if len(q.Levels) > 0 {
			if err := writeLevels(w, q, width); err != nil {
				return err
			}
			fmt.Fprintln(w, "Interaction (per condition):")
		}
		for _, c := range q.Conditions {
			t.Rows = append(t.Rows, resultRow(q, c))
		}
		if err := t.Write(w, "text", width); err != nil {
			return err
		}
		for _, n := range q.Notes {
			writeWrapped(w, "Note: "+n, width)
		}
	}
	fmt.Fprintln(w, "\nEnrollment")
	t := Table{Columns: []Column{{Header: "CONDITION", Shrink: true}, {Header: "WEIGHT"}, {Header: "USERS"}, {Header: "SHARE"}}}
	for _, c := range r.Enrollment.Conditions {
		t.Rows = append(t.Rows, []string{c.Condition, strconv.FormatFloat(c.Weight, 'f', -1, 64), strconv.Itoa(c.Users), formatShare(c.Share)})
	}
	if err := t.Write(w, "text", width); err != nil {
		return err
	}
	fmt.Fprintf(w, "Excluded: %d users, %d groups\n", r.Enrollment.UsersExcluded, r.Enrollment.GroupsExcluded)
	writeWrapped(w, srmLine(r.SampleRatio), width)
	fmt.Fprintln(w, "\nWhat the numbers mean")
	for _, m := range r.Meaning {
		writeWrapped(w, "- "+m, width)
	}
	return nil
}

// writeLevels is a factorial query's main effect, one row per level.
func writeLevels(w io.Writer, q readmodel.QueryResults, width int) error {
	fmt.Fprintln(w, "Main effect (per level):")
	t := Table{Columns: []Column{{Header: "FACTOR", Shrink: true}, {Header: "LEVEL", Shrink: true}, {Header: "N"}, {Header: "VALUE"}}}
	for _, l := range q.Levels {
		value := "no data"
		switch {
		case q.Rejected:
			value = "failed"
		case l.Value != nil && l.N > 0:
			value = readmodel.FormatNumber(*l.Value, q.Percent)
		}
		t.Rows = append(t.Rows, []string{l.Factor, l.Level, strconv.Itoa(l.N), value})
	}
	return t.Write(w, "text", width)
}

// srmLine is the sample-ratio line, a warning when the split is off.
func srmLine(s readmodel.SampleRatio) string {
	if s.Mismatch {
		return "Warning: " + s.Line
	}
	return s.Line
}

func queryTitle(q readmodel.QueryResults) string {
	what := q.Operation
	if q.Compare != "" {
		what += " where value " + q.Compare
	}
	return fmt.Sprintf("Query %q: %s of %s (%s)", q.Name, what, q.MetricKey, strings.ToLower(q.RepeatedMeasure))
}

func resultRow(q readmodel.QueryResults, c readmodel.ConditionValue) []string {
	n := strconv.Itoa(c.N)
	switch {
	case q.Rejected:
		return []string{c.Code, "-", "failed", "-", "-"}
	case c.N == 0:
		return []string{c.Code, n, "no data", "-", "-"}
	}
	value := "-"
	if c.Value != nil {
		value = readmodel.FormatNumber(*c.Value, q.Percent)
	}
	iv, vs := "-", "-"
	if c.TooLittle {
		iv = "too little data"
	} else if c.Interval != nil {
		iv = readmodel.FormatInterval(c.Interval, q.Percent)
	}
	if c.VsFirst != nil {
		vs = readmodel.FormatDiff(c.VsFirst, q.Kind == readmodel.KindProportion)
	}
	return []string{c.Code, n, value, iv, vs}
}

// writeWrapped writes text in lines of at most width runes, continuation
// lines indented by two spaces.
func writeWrapped(w io.Writer, text string, width int) {
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) > width:
			fmt.Fprintln(w, line)
			line = "  " + word
		default:
			line += " " + word
		}
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
}

// writeSampleRatioLine adds the sample-ratio line under the tables of
// `experiments stats` (the data formats carry it as sample_ratio).
func writeSampleRatioLine(opts *ExperimentRefOptions, sr readmodel.SampleRatio) error {
	if opts.Output != "text" && opts.Output != "wide" && opts.Output != "" {
		return nil
	}
	writeWrapped(opts.IO.Out, srmLine(sr), tableWidth(opts.IO.Width))
	return nil
}

func tableWidth(w int) int {
	if w <= 0 {
		return resultsWidth
	}
	return w
}
