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
// implementations, chosen by --output: tables for people, JSON or YAML of
// the same typed data for programs.
type ReadView interface {
	Health(HealthInfo) error
	Contexts([]ContextInfo) error
	Context(ContextInfo) error
	Experiments(list []ExperimentSummary, filtered bool) error
	// Experiment shows one experiment: the read model in a table, the
	// server's own object with -o json|yaml (as kubectl does).
	Experiment(*upgrade.Experiment) error
	Stats(StatsReport) error
	Version(VersionInfo) error
}

// NewReadView picks the view for an --output format.
func NewReadView(format string, streams *IOStreams) ReadView {
	if format == "json" || format == "yaml" {
		return &dataView{w: streams.Out, format: format}
	}
	return &humanView{out: streams.Out, errOut: streams.ErrOut}
}

// dataView writes each result as one JSON or YAML document on stdout.
type dataView struct {
	w      io.Writer
	format string
}

func (v *dataView) Health(h HealthInfo) error              { return WriteData(v.w, v.format, h) }
func (v *dataView) Contexts(list []ContextInfo) error      { return WriteData(v.w, v.format, list) }
func (v *dataView) Context(c ContextInfo) error            { return WriteData(v.w, v.format, c) }
func (v *dataView) Experiment(e *upgrade.Experiment) error { return WriteData(v.w, v.format, e) }
func (v *dataView) Stats(s StatsReport) error              { return WriteData(v.w, v.format, s) }
func (v *dataView) Version(i VersionInfo) error            { return WriteData(v.w, v.format, i) }

func (v *dataView) Experiments(list []ExperimentSummary, _ bool) error {
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
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && oldBool[strings.ToLower(n.Value)] {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

var oldBool = map[string]bool{"y": true, "yes": true, "n": true, "no": true, "on": true, "off": true}
