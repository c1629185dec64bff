package cmd

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/internal/textdist"
)

// The -o values each command supports. A command declares them with
// withOutputs; an explicit -o it does not support is exit 2, naming the
// ones it does. An output set in the config file is a default for every
// command, so a command that lacks it falls back to text instead.
//
//	text  tables and descriptions for people (tables fit $COLUMNS)
//	wide  the table with every column and no cell shortened
//	json  the documented shape (docs/json.md), indented
//	yaml  the same data as YAML
//	raw   the server's own object, as it sent it, in JSON
const annotationOutputs = "upgrade-agent/outputs"

// withOutputs declares the -o values c supports ("text" is implied).
func withOutputs(c *cobra.Command, formats ...string) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annotationOutputs] = strings.Join(append([]string{"text"}, formats...), ",")
	return c
}

// supportedOutputs are the -o values of c.
func supportedOutputs(c *cobra.Command) []string {
	if s := c.Annotations[annotationOutputs]; s != "" {
		return strings.Split(s, ",")
	}
	return []string{"text"}
}

// checkOutput applies the command's -o values to the resolved one.
func checkOutput(c *cobra.Command, o *GlobalOptions, explicit bool) error {
	if c.Name() == "help" || !c.Runnable() || c.HasSubCommands() {
		return nil
	}
	allowed := supportedOutputs(c)
	if oneOf(o.Output, allowed) {
		return nil
	}
	if !explicit {
		o.Output = "text"
		return nil
	}
	return outputError(c, o.Output)
}

// checkOutputFlag refuses an -o value c does not take before anything
// else reads it, so the message names only c's values.
func checkOutputFlag(c *cobra.Command, value string, given bool) error {
	if !given || c.Name() == "help" || !c.Runnable() || c.HasSubCommands() || oneOf(value, supportedOutputs(c)) {
		return nil
	}
	return outputError(c, value)
}

// outputError says which -o values c takes and, for a near miss (-o jsn),
// which one was meant: always one of c's own.
func outputError(c *cobra.Command, value string) error {
	allowed := supportedOutputs(c)
	msg := fmt.Sprintf("%q does not support --output %s: use %s", c.CommandPath(), value, strings.Join(allowed, ", "))
	best := textdist.Closest(strings.ToLower(strings.TrimSpace(value)), allowed, 3)
	if best != "" && best != value {
		msg += "; did you mean -o " + best + "?"
	}
	return &FlagError{Err: errors.New(msg), CmdPath: c.CommandPath()}
}

// outputHelp is the --output line of c's help: the values c takes.
func outputHelp(c *cobra.Command) string {
	return "output `format`: " + strings.Join(supportedOutputs(c), ", ") + " (default text)"
}

// Terminal-safe text. Names, messages and replies come from UpGrade, the
// model and other people; printed raw, an ESC sequence or a carriage
// return in an experiment name could rewrite the confirmation line a
// person reads before saying yes. In text output every control character
// but newline and tab, every C1 control, the bidirectional overrides and
// every byte that is not UTF-8 are shown as Go escapes (\x1b, \r, \u202e),
// so they are visible and harmless. Data formats (json, yaml, raw) are
// exact: their encoders escape what needs escaping.

// safeWriter escapes what a terminal would act on.
type safeWriter struct{ w io.Writer }

// terminalSafe wraps w, once.
func terminalSafe(w io.Writer) io.Writer {
	if _, ok := w.(*safeWriter); ok || w == nil {
		return w
	}
	return &safeWriter{w: w}
}

// rawWriter is the writer under a safeWriter, for output that is the
// program's own terminal control (a progress bar).
func rawWriter(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}

func (s *safeWriter) Write(p []byte) (int, error) {
	safe := safeText(p)
	if len(safe) == len(p) {
		if _, err := s.w.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if _, err := s.w.Write(safe); err != nil {
		return 0, err
	}
	return len(p), nil
}

// safeText returns p with what a terminal would act on escaped; p itself
// when there is nothing to escape.
func safeText(p []byte) []byte {
	clean := true
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if unsafeRune(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, p[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unsafeRune(r, n):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r, n):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(p[i : i+n])
		}
		i += n
	}
	return []byte(b.String())
}

func unsafeRune(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size <= 1:
		return true
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional overrides: text that reads backwards
	}
	return false
}
