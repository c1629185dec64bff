package scenario

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteJUnit writes the reports as JUnit XML (one test case per scenario),
// the format CI systems read. Each case's time is its own wall time; the
// suite's is wall, the run's wall time (with --parallel the cases overlap,
// so their sum would overstate it).
func WriteJUnit(w io.Writer, reports []*Report, wall time.Duration) error {
	suite := junitSuite{Name: "upgrade-agent scenarios"}
	for _, r := range reports {
		c := junitCase{Name: r.Name, Classname: "scenario", File: r.File, Time: seconds(r.Duration), SystemOut: r.Transcript}
		if !r.Passed() {
			suite.Failures++
			body := strings.Join(r.Failures, "\n")
			if r.GoldenDiff != "" {
				body += "\n\n" + r.GoldenDiff
			}
			c.Failure = &junitFailure{Message: oneLine(r.Failures[0]), Type: "scenario", Body: body}
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests = len(reports)
	suite.Time = seconds(wall)
	doc := junitSuites{Tests: suite.Tests, Failures: suite.Failures, Time: suite.Time, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
