package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// maxMetadataBytes bounds a context metadata file: UpGrade's own, with every
// context of a large deployment, is tens of KiB.
const maxMetadataBytes = 4 << 20

// LoadMetadataFile reads context metadata in the form the real server takes
// in its CONTEXT_METADATA setting:
//
//	{"<context>": {"CONDITIONS": [...], "GROUP_TYPES": [...], "EXP_IDS": [...], "EXP_POINTS": [...]}}
//
// The answer of GET /experiments/contextMetaData ({"contextMetadata": {...}})
// is accepted too, so a copy saved from a server can be fed back. Parsing is
// strict: unknown keys, wrong types and trailing data are errors that name
// the file and the line.
func LoadMetadataFile(path string) (upgrade.ContextMetadata, error) {
	b, err := safefile.ReadFile(path, maxMetadataBytes)
	if err != nil {
		return nil, fmt.Errorf("context metadata %s: %w", path, err)
	}
	m, err := parseMetadata(b)
	if err != nil {
		return nil, fmt.Errorf("context metadata %s: %w", path, err)
	}
	return m, nil
}

func parseMetadata(b []byte) (upgrade.ContextMetadata, error) {
	var top map[string]json.RawMessage
	if err := strictDecode(b, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, fmt.Errorf("expected a JSON object of contexts, got null")
	}
	if inner, ok := top["contextMetadata"]; ok && len(top) == 1 {
		// The saved answer of GET /experiments/contextMetaData. Decode the
		// inner object on its own; offsets then point into it, so report
		// no line rather than a wrong one.
		top = nil
		if err := strictDecode(inner, &top); err != nil {
			return nil, fmt.Errorf("contextMetadata: %w", err)
		}
		b = inner
	}
	var m upgrade.ContextMetadata
	if err := strictDecode(b, &m); err != nil {
		return nil, err
	}
	if err := checkMetadata(m); err != nil {
		return nil, err
	}
	return copyMetadata(m), nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(b, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// checkMetadata rejects metadata the simulator could not serve sensibly.
func checkMetadata(m upgrade.ContextMetadata) error {
	if len(m) == 0 {
		return fmt.Errorf("no contexts defined")
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("a context has an empty name")
		}
		info := m[name]
		fields := []struct {
			name string
			list []string
		}{
			{"CONDITIONS", info.Conditions}, {"GROUP_TYPES", info.GroupTypes},
			{"EXP_IDS", info.ExpIDs}, {"EXP_POINTS", info.ExpPoints},
		}
		for _, f := range fields {
			for i, v := range f.list {
				if strings.TrimSpace(v) == "" {
					return fmt.Errorf("context %q: %s[%d] is empty", name, f.name, i)
				}
			}
		}
	}
	return nil
}
