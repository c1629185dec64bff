package quality

import (
	"encoding/json"
	"strings"
	"testing"
)

// The habits real models have with import_feature_flags and
// import_segments: the export pasted as a string or as an object, one
// file instead of an array, stray spaces and an empty file name, an
// export whose key or name the server has already. Every case ends with
// the backend holding what was shown and approved (or nothing).

const readingTips = `{"name": "Reading tips", "key": "READING_TIPS", "description": "", "context": ["assign-prog"], "tags": [], "status": "enabled", "filterMode": "includeAll", "featureFlagSegmentInclusion": [], "featureFlagSegmentExclusion": [{"enabled": true, "listType": "Individual", "segment": {"name": "exclude list", "description": "", "context": "assign-prog", "type": "private", "individualForSegment": [{"userId": "qa-1"}], "groupForSegment": [], "subSegments": []}}]}`

const summerCohort = `[{"name": "summer cohort", "description": "", "context": "assign-prog", "type": "public", "individualForSegment": [{"userId": "s1"}, {"userId": "s2"}], "groupForSegment": [{"groupId": "c9", "type": "classId"}], "subSegments": []}]`

// filesParam is the files param of one file, as JSON.
func filesParam(name, content string) string {
	b, _ := json.Marshal(map[string]any{"files": []any{map[string]any{"name": name, "content": content}}})
	return string(b)
}

// reencoded is a JSON document as the binder writes one sent as an
// object: compact, keys sorted.
func reencoded(doc string) string {
	var v any
	_ = json.Unmarshal([]byte(doc), &v)
	b, _ := json.Marshal(v)
	return string(b)
}

// quoted is s as a YAML single-quoted scalar.
func quoted(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func TestHabitImports(t *testing.T) {
	t.Parallel()
	readingFlag := hasFlag("READING_TIPS", "disabled", "includeAll", []string{}, []string{"users:qa-1"})
	runBehaviour(t, []behaviourCase{
		{name: "flag export as a string, one file instead of an array, stray spaces", steps: []turnStep{
			request("Import this flag export.", "import_feature_flags", `{files: {name: " reading-tips.json ", content: `+quoted(readingTips)+`}}`),
			yes("import_feature_flags"),
		}, backend: []check{readingFlag}},
		{name: "flag export as an object, no file name", steps: []turnStep{
			request("Import this flag export.", "import_feature_flags", `{files: [{name: "", content: `+readingTips+`}]}`).
				expect(func(w *turnWant) { w.params = filesParam("file1.json", reencoded(readingTips)) }),
			yes("import_feature_flags"),
		}, backend: []check{readingFlag}},
		{name: "a key the context has is refused in Go", steps: []turnStep{
			{say: "Import this flag export.",
				llm:  analyze + gather("import_feature_flags", `{files: [{name: math.json, content: `+quoted(strings.NewReplacer("READING_TIPS", "MATH_HINTS", "Reading tips", "Math hints copy").Replace(readingTips))+`}]}`) + respond,
				want: turnWant{field: "files", calls: 3, seen: []string{"already has key MATH_HINTS in context assign-prog"}}},
		}, backend: []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{"users:u9"}), noFlag("READING_TIPS")}},
		{name: "segment export array as a string, name null", steps: []turnStep{
			request("Import this segment export.", "import_segments", `{files: [{name: null, content: `+quoted(summerCohort)+`}]}`),
			yes("import_segments"),
		}, backend: []check{hasSegment("summer cohort", "s1", "s2")}},
		{name: "segment export as an object without .json", steps: []turnStep{
			request("Import the summer cohort.", "import_segments", `{files: [{name: cohort.txt, content: `+strings.Trim(summerCohort, "[]")+`}]}`),
			yes("import_segments"),
		}, backend: []check{hasSegment("summer cohort", "s1", "s2")}},
		{name: "a segment name the context has is refused in Go", steps: []turnStep{
			{say: "Import this segment export.",
				llm:  analyze + gather("import_segments", `{files: [{name: pilot.json, content: `+quoted(strings.ReplaceAll(summerCohort, "summer cohort", "pilot schools"))+`}]}`) + respond,
				want: turnWant{field: "files", calls: 3, seen: []string{"imports it anyway"}}},
		}, backend: []check{hasSegment("pilot schools", "u1", "u2")}},
	})
}
