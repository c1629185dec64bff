package eval

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteText writes the human report: one line per case, the failure
// reasons, then the figures.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	for _, c := range r.Cases {
		word := "PASS"
		if c.Passed < len(c.Trials) {
			word = "FAIL"
		}
		fmt.Fprintf(&b, "%s %s  %d/%d\n", word, c.Name, c.Passed, len(c.Trials))
		for _, t := range c.Trials {
			if !t.Passed {
				fmt.Fprintf(&b, "    trial %d: %s\n", t.Trial, t.Reason)
			}
		}
	}
	b.WriteString("\n")
	b.WriteString(summary(r, "  "))
	_, err := io.WriteString(w, b.String())
	return err
}

func summary(r *Report, indent string) string {
	var b strings.Builder
	line := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "%s%-18s %s\n", indent, k, fmt.Sprintf(format, args...))
	}
	line("cases", "%d x %d trials", len(r.Cases), r.Trials)
	line("pass@1", "%.4f", r.Pass1)
	for k := range r.PassHat {
		line(fmt.Sprintf("pass^%d", k+1), "%.4f", r.PassHat[k])
	}
	for k := range r.PassAt {
		line(fmt.Sprintf("pass@%d", k+1), "%.4f", r.PassAt[k])
	}
	est := ""
	if r.TokensEstimated {
		est = " (estimated: chars/4)"
	}
	line("LLM calls", "%d", r.LLMCalls)
	line("tokens", "%d prompt, %d completion%s", r.PromptTokens, r.CompletionTokens, est)
	line("turn latency", "p50 %d ms, p95 %d ms", r.LatencyP50Ms, r.LatencyP95Ms)
	if r.CostUSD != nil {
		line("cost", "$%.4f", *r.CostUSD)
	}
	line("forbidden events", "%d", r.ForbiddenEvents)
	line("unapproved writes", "%d", r.UnapprovedWrite)
	temp := "default"
	if r.Info.Temperature != nil {
		temp = fmt.Sprintf("%g", *r.Info.Temperature)
	}
	line("model", "%s at %s, temperature %s", orDash(r.Info.Model), orDash(r.Info.BaseURLHost), temp)
	line("date", "%s", r.Info.Date)
	line("version", "%s", r.Info.Version)
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJSON writes the report as JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes report.md.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	b.WriteString("# upgrade-agent eval\n\n| case | passed | failures |\n|---|---|---|\n")
	for _, c := range r.Cases {
		var reasons []string
		for _, t := range c.Trials {
			if !t.Passed {
				reasons = append(reasons, fmt.Sprintf("trial %d: %s", t.Trial, strings.ReplaceAll(t.Reason, "|", `\|`)))
			}
		}
		fmt.Fprintf(&b, "| %s | %d/%d | %s |\n", c.Name, c.Passed, len(c.Trials), strings.Join(reasons, "<br>"))
	}
	b.WriteString("\n```\n")
	b.WriteString(summary(r, ""))
	b.WriteString("```\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteOut fills dir with report.json, report.md and one transcript per
// trial: transcripts/<case>-<trial>.jsonl.
func WriteOut(dir string, r *Report) error {
	if err := os.MkdirAll(filepath.Join(dir, "transcripts"), 0o755); err != nil {
		return err
	}
	var j, m bytes.Buffer
	if err := WriteJSON(&j, r); err != nil {
		return err
	}
	if err := WriteMarkdown(&m, r); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), j.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), m.Bytes(), 0o644); err != nil {
		return err
	}
	for _, c := range r.Cases {
		for _, t := range c.Trials {
			var b bytes.Buffer
			for _, l := range t.Transcript {
				b.Write(l)
				b.WriteByte('\n')
			}
			name := fmt.Sprintf("%s-%d.jsonl", c.Name, t.Trial)
			if err := os.WriteFile(filepath.Join(dir, "transcripts", name), b.Bytes(), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes one test case per trial: "<case>#<trial>".
func WriteJUnit(w io.Writer, r *Report) error {
	s := junitSuite{Name: "upgrade-agent eval"}
	for _, c := range r.Cases {
		for _, t := range c.Trials {
			jc := junitCase{Name: fmt.Sprintf("%s#%d", c.Name, t.Trial), ClassName: c.File, Time: fmt.Sprintf("%.3f", float64(t.DurationMs)/1000)}
			if !t.Passed {
				jc.Failure = &junitFailure{Message: t.Reason}
				s.Failures++
			}
			s.Tests++
			s.Cases = append(s.Cases, jc)
		}
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
