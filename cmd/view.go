package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// The typed results of the read-only commands. Their JSON names are a
// public interface (scripts parse -o json and -o yaml): add fields freely,
// never rename them.

// HealthInfo is the result of "health".
type HealthInfo struct {
	URL         string `json:"url"`
	Embedded    bool   `json:"embedded"` // the embedded simulator, not a real server
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// The results of experiments list|show|stats and contexts are the read
// model the agent's tools show too (one formula per figure).
type (
	ContextInfo         = readmodel.Context
	ConditionWeight     = readmodel.ConditionWeight
	DecisionPointRef    = readmodel.DecisionPointRef
	ExperimentSummary   = readmodel.Summary
	ExperimentInfo      = readmodel.Experiment
	ConditionEnrollment = readmodel.ConditionEnrollment
	StatsReport         = readmodel.Enrollment
)

// VersionInfo is the result of "version".
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// ReadView renders the results of the read-only commands. There are two
// implementations, chosen by --output: tables for people (text, wide), and
// JSON or YAML of the same typed data for programs (json, yaml; raw gives
// the server's own object where a command has one).
type ReadView interface {
	Health(HealthInfo) error
	Contexts([]ContextInfo) error
	Context(ContextInfo) error
	Experiments(list []ExperimentInfo, filtered bool) error
	// Experiment shows one experiment: a description for people, the
	// read model's shape (ExperimentInfo, as in the list) with -o json|yaml,
	// and the server's own object with -o raw.
	Experiment(*upgrade.Experiment) error
	// Stats shows the enrollment; raw is the server's answer, for -o raw.
	Stats(s StatsReport, raw *upgrade.EnrollmentStats) error
	Version(VersionInfo) error
}

// NewReadView picks the view for an --output format.
func NewReadView(format string, streams *IOStreams) ReadView {
	switch format {
	case "json", "yaml":
		return &dataView{w: streams.Out, format: format}
	case "raw":
		return &dataView{w: streams.Out, format: "json", raw: true}
	}
	return &humanView{out: streams.Out, errOut: streams.ErrOut, output: format, width: streams.Width}
}

// dataView writes each result as one JSON or YAML document on stdout.
type dataView struct {
	w      io.Writer
	format string
	raw    bool // the server's own objects where there are any
}

func (v *dataView) Health(h HealthInfo) error         { return WriteData(v.w, v.format, h) }
func (v *dataView) Contexts(list []ContextInfo) error { return WriteData(v.w, v.format, list) }
func (v *dataView) Context(c ContextInfo) error       { return WriteData(v.w, v.format, c) }
func (v *dataView) Version(i VersionInfo) error       { return WriteData(v.w, v.format, i) }

func (v *dataView) Experiment(e *upgrade.Experiment) error {
	if v.raw {
		return WriteData(v.w, v.format, e)
	}
	return WriteData(v.w, v.format, readmodel.ExperimentOf(e))
}

func (v *dataView) Stats(s StatsReport, raw *upgrade.EnrollmentStats) error {
	if v.raw && raw != nil {
		return WriteData(v.w, v.format, raw)
	}
	return WriteData(v.w, v.format, s)
}

func (v *dataView) Experiments(list []ExperimentInfo, _ bool) error {
	return WriteData(v.w, v.format, list)
}

// WriteData writes v as indented JSON, or as YAML with the same field names
// and order (the JSON encoding is converted, so types that only have JSON
// tags, like upgrade.Experiment, come out right).
func WriteData(w io.Writer, format string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s output: %w", format, err)
	}
	if format != "yaml" {
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "  "); err != nil {
			return fmt.Errorf("encode json output: %w", err)
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("encode yaml output: %w", err)
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encode yaml output: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode yaml output: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// blockStyle drops the flow and quoting styles JSON parsing leaves on the
// nodes, so the encoder writes ordinary block YAML and quotes only strings
// that need it. It keeps quotes on the YAML 1.1 booleans ("yes", "off"...),
// which older parsers would otherwise read as true or false.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && oldBool(strings.ToLower(n.Value)) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// oldBool reports the words YAML 1.1 reads as booleans (a switch: a
// package-level map is built at init).
func oldBool(s string) bool {
	switch s {
	case "y", "yes", "n", "no", "on", "off":
		return true
	}
	return false
}
