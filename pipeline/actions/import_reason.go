package actions

import (
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
)

// class-validator's text, as UpGrade 6.5's import routes answer it: one
// "property P has failed the following constraints: c1, c2" per broken
// property, each segment one behind "An instance of SegmentInputValidator
// has failed the validation:", joined with ", " and newlines.
var (
	cvProperty = lazyre.Of(`property (\S+) has failed the following constraints: ([A-Za-z]+(?:, [A-Za-z]+)*)`)
	cvInstance = lazyre.Of(`An instance of \w+ has failed the validation:`)
)

// serverReason puts an import route's error text on one line: each
// broken property once, with the checks it fails, then any other
// sentence the server added (an unknown app context, a missing
// stratification factor). Text that is not class-validator's comes back
// with its whitespace folded.
func serverReason(msg string) string {
	ms := cvProperty.Get().FindAllStringSubmatch(msg, -1)
	if len(ms) == 0 {
		return strings.Join(strings.Fields(msg), " ")
	}
	var parts []string
	seen := map[string]bool{}
	for _, m := range ms {
		p := m[1] + " (" + m[2] + ")"
		if !seen[p] {
			seen[p] = true
			parts = append(parts, p)
		}
	}
	out := "UpGrade's checks fail on " + strings.Join(parts, ", ")
	rest := cvInstance.Get().ReplaceAllString(cvProperty.Get().ReplaceAllString(msg, "\x00"), "\x00")
	var extra []string
	for _, piece := range strings.Split(rest, "\x00") {
		s := strings.Trim(strings.Join(strings.Fields(piece), " "), " ,-")
		if s != "" {
			extra = append(extra, s)
		}
	}
	if len(extra) > 0 {
		out += "; " + strings.Join(extra, " ")
	}
	return out
}
