package cmd

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progressLine is a progress bar on a terminal: one line redrawn in place
// with a carriage return,
//
//	job j1  40% |████████████                  | (120/300) [4s:6s]
//
// (elapsed and predicted time to go in brackets), and at 100% the line
// without the times, ended by a newline. It is drawn only when stderr is a
// terminal; jobProgress writes plain lines otherwise.
type progressLine struct {
	w        io.Writer
	label    string
	now      func() time.Time
	start    time.Time
	from     int // done at the start, so the rate counts what moved since
	drawn    time.Time
	widest   int
	open     bool // a line is on screen without its newline
	finished bool
}

// progressThrottle is the shortest time between two redraws (the end is
// always drawn).
const progressThrottle = 100 * time.Millisecond

// progressBarWidth is the width of the bar between its two "|".
const progressBarWidth = 30

func newProgressLine(w io.Writer, label string, done int, now func() time.Time) *progressLine {
	return &progressLine{w: w, label: label, now: now, start: now(), from: done}
}

// set draws done of total, unless the last draw was less than
// progressThrottle ago; reaching total draws the full bar and ends the
// line.
func (b *progressLine) set(done, total int) {
	if b.finished {
		return
	}
	now := b.now()
	complete := done >= total
	if !complete && !b.drawn.IsZero() && now.Sub(b.drawn) < progressThrottle {
		return
	}
	line := renderProgressLine(b.label, done, total, b.from, now.Sub(b.start))
	pad := ""
	if n := len([]rune(line)); n < b.widest {
		pad = strings.Repeat(" ", b.widest-n)
	} else {
		b.widest = n
	}
	fmt.Fprint(b.w, "\r"+line+pad)
	b.drawn, b.open = now, true
	if complete {
		b.end()
	}
}

// end ends the line on screen, if one is open, so what follows starts on
// a line of its own.
func (b *progressLine) end() {
	if b.open {
		fmt.Fprintln(b.w)
	}
	b.open, b.finished = false, true
}

// renderProgressLine is the text of the line for done of total, after
// elapsed since the bar appeared with from done.
func renderProgressLine(label string, done, total, from int, elapsed time.Duration) string {
	done = max(0, min(done, total))
	percent := done * 100 / total
	filled := progressBarWidth * percent / 100
	bar := "|" + strings.Repeat("█", filled) + strings.Repeat(" ", progressBarWidth-filled) + "|"
	line := fmt.Sprintf("%s %3d%% %s (%d/%d)", label, percent, bar, done, total)
	if done == total {
		return line + " "
	}
	togo := "?"
	if moved := done - from; moved > 0 && elapsed > 0 {
		left := time.Duration(float64(elapsed) * float64(total-done) / float64(moved))
		togo = left.Truncate(time.Second).String()
	}
	return fmt.Sprintf("%s [%s:%s]", line, elapsed.Truncate(time.Second), togo)
}
