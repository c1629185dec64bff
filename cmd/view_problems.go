package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// writeProblems prints, in Go's words, what went wrong in a turn or what
// the person refused: failed actions, the turn's errors (validation
// among them) and a declined confirmation. The model's reply may leave
// them out or soften them; a person reading text must still see them, as
// a program reading -o json does. A line whose substance the reply already
// says verbatim is not repeated, nor the errors in failure: the lines of
// the error that failed the turn, which the command prints once as
// "Error: ...".
func writeProblems(w io.Writer, res *pipeline.Result, failure map[string]bool) {
	said := func(s string) bool { return s != "" && strings.Contains(res.Response, s) }
	shown := map[string]bool{}
	for m := range failure {
		shown[m] = true
	}
	for _, a := range res.Actions {
		if a.Status == "success" {
			continue
		}
		shown[a.Error] = true
		if said(a.Error) {
			continue
		}
		msg := a.Error
		if msg == "" {
			msg = a.Status
		}
		fmt.Fprintf(w, "error: %s %s: %s\n", a.Action, statusWord(a.Status), msg)
	}
	for _, e := range res.Errors {
		if shown[e.Message] || said(e.Message) {
			continue
		}
		shown[e.Message] = true
		kind := e.Type
		if e.Field != "" {
			kind += " of " + e.Field
		}
		fmt.Fprintf(w, "error: %s: %s\n", kind, e.Message)
	}
	if d := res.Declined; d != nil && !said(d.Summary) {
		fmt.Fprintf(w, "declined: %s; nothing was run\n", strings.TrimSuffix(d.Summary, "."))
	}
}

func statusWord(status string) string {
	if status == "error" {
		return "failed"
	}
	return status
}
