package cmd

import (
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// Tables for people, as kubectl and gh print them: the columns that matter
// by default, every column with -o wide, and a table that fits the
// terminal. Every table command renders through Table, so new commands get
// the same behaviour by filling one in (docs/ARCHITECTURE.md, "Adding a
// command").

// Column is one column of a Table.
type Column struct {
	Header string
	// Wide columns are shown only with -o wide.
	Wide bool
	// Shrink lets the column's cells be cut, with "…", to fit the width.
	// Names, messages and lists shrink; ids, states and times do not.
	Shrink bool
}

// Table is a header and rows; each row has one cell per column.
type Table struct {
	Columns []Column
	Rows    [][]string
}

// minShrink is the narrowest a shrinking column gets (or its header, if wider).
const minShrink = 8

// Write renders t with the layout of an output format: "wide" shows every
// column with no cell cut; otherwise the wide columns are left out and,
// when width > 0, shrinking columns are cut so each line fits in width.
func (t Table) Write(w io.Writer, output string, width int) error {
	wide := output == "wide"
	var keep []int
	for i, c := range t.Columns {
		if wide || !c.Wide {
			keep = append(keep, i)
		}
	}
	header := make([]string, len(keep))
	for j, i := range keep {
		header[j] = t.Columns[i].Header
	}
	rows := make([][]string, len(t.Rows))
	for r, row := range t.Rows {
		cells := make([]string, len(keep))
		for j, i := range keep {
			if i < len(row) {
				// Escaped first, so that fit measures what is shown.
				cells[j] = string(safeText([]byte(strings.ReplaceAll(row[i], "\n", " "))))
			}
		}
		rows[r] = cells
	}
	if !wide && width > 0 {
		fit(t.Columns, keep, header, rows, width)
	}
	return RenderTable(w, header, rows)
}

// fit narrows the shrinking columns, widest first, until a line fits.
func fit(cols []Column, keep []int, header []string, rows [][]string, width int) {
	widths := make([]int, len(header))
	for j, h := range header {
		widths[j] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for j, c := range r {
			widths[j] = max(widths[j], utf8.RuneCountInString(c))
		}
	}
	total := func() int {
		n := 2 * (len(widths) - 1)
		for _, w := range widths {
			n += w
		}
		return n
	}
	for total() > width {
		best := -1
		for j, i := range keep {
			floor := max(minShrink, utf8.RuneCountInString(header[j]))
			if cols[i].Shrink && widths[j] > floor && (best < 0 || widths[j] > widths[best]) {
				best = j
			}
		}
		if best < 0 {
			break // nothing left to cut: the table is as narrow as it gets
		}
		widths[best]--
	}
	for _, r := range rows {
		for j := range r {
			r[j] = truncateLine(r[j], widths[j])
		}
	}
}

// terminalWidth is $COLUMNS when set, else the width of the terminal on
// stdout; 0 (no limit) when stdout is not a terminal, so that a script
// piping a table gets whole cells.
func terminalWidth(getenv func(string) string, stdoutTTY bool) int {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	if stdoutTTY {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return 0
}
