package upgrade

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func fp(v float64) *float64 { return &v }

// The analysis answer as UpGrade 6.5 gives it: numeric text, the median a
// number, participantsLogged text or 0, "rejected" markers, an unknown id
// without mainEffect.
func TestQueryResultParsing(t *testing.T) {
	body := `[
	 {"id":"q1","mainEffect":[{"conditionId":"c1","result":"11.6428571428571429","participantsLogged":"7"},
	   {"conditionId":"c2","result":"0","participantsLogged":0}],"interactionEffect":null},
	 {"id":"q2","mainEffect":[{"conditionId":"c1","result":4.5,"participantsLogged":" 7 "},{"conditionId":"c2","result":null,"participantsLogged":"1"}],"interactionEffect":null},
	 {"id":"q3","mainEffect":["rejected",{"conditionId":"c1","result":"0","participantsLogged":0}],"interactionEffect":null},
	 {"id":"q4","interactionEffect":null}
	]`
	var got []QueryResult
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := []QueryResult{
		{QueryID: "q1", Found: true, MainEffect: []ConditionResult{{ConditionID: "c1", Value: fp(11.6428571428571429), Participants: 7}, {ConditionID: "c2", Value: fp(0)}}, Interaction: []ConditionResult{}},
		{QueryID: "q2", Found: true, MainEffect: []ConditionResult{{ConditionID: "c1", Value: fp(4.5), Participants: 7}, {ConditionID: "c2", Participants: 1}}, Interaction: []ConditionResult{}},
		{QueryID: "q3", Found: true, Rejected: true, MainEffect: []ConditionResult{{ConditionID: "c1", Value: fp(0)}}, Interaction: []ConditionResult{}},
		{QueryID: "q4", MainEffect: []ConditionResult{}, Interaction: []ConditionResult{}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("parsed (-want +got):\n%s", d)
	}
	var bad []QueryResult
	if err := json.Unmarshal([]byte(`[{"id":"q","mainEffect":[{"conditionId":"c","result":"abc"}]}]`), &bad); err == nil {
		t.Error("a result that is not a number was accepted")
	}
}

func TestQueryListAndEdits(t *testing.T) {
	e := &Experiment{ID: "e", Queries: []json.RawMessage{
		json.RawMessage(`{"id":"a","name":"Pass","query":{"operationType":"percentage","compareFn":"=","compareValue":1},"metric":{"key":"outcome","type":"categorical"},"repeatedMeasure":"EARLIEST","order":1,"createdAt":"x"}`),
		json.RawMessage(`{"id":"b","name":"Orphan","query":{"operationType":"avg"},"metric":null,"repeatedMeasure":"MEAN","order":3}`),
	}}
	qs, err := e.QueryList()
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{
		{ID: "a", Name: "Pass", Query: QueryOp{OperationType: "percentage", CompareFn: "=", CompareValue: "1"}, MetricKey: "outcome", MetricType: "categorical", RepeatedMeasure: "EARLIEST", Order: 1},
		{ID: "b", Name: "Orphan", Query: QueryOp{OperationType: "avg"}, RepeatedMeasure: "MEAN", Order: 3},
	}
	if d := cmp.Diff(want, qs); d != "" {
		t.Errorf("queries (-want +got):\n%s", d)
	}
	id, err := e.AddQuery("Mean", "score", RepeatedMean, QueryOp{OperationType: "avg"})
	if err != nil || !IsUUID(id) {
		t.Fatalf("AddQuery: %q %v", id, err)
	}
	qs, _ = e.QueryList()
	if len(qs) != 3 || qs[2].Order != 4 || qs[2].MetricKey != "score" {
		t.Errorf("added query: %+v", qs[2])
	}
	// The queries read are sent back byte for byte.
	if string(e.Queries[0]) != `{"id":"a","name":"Pass","query":{"operationType":"percentage","compareFn":"=","compareValue":1},"metric":{"key":"outcome","type":"categorical"},"repeatedMeasure":"EARLIEST","order":1,"createdAt":"x"}` {
		t.Errorf("first query changed: %s", e.Queries[0])
	}
	if !e.RemoveQuery("b") || e.RemoveQuery("b") || len(e.Queries) != 2 {
		t.Errorf("RemoveQuery: %d left", len(e.Queries))
	}
	if _, err := (&Experiment{Queries: []json.RawMessage{json.RawMessage(`[1]`)}}).QueryList(); err == nil {
		t.Error("a query that is not an object was accepted")
	}
}

func TestMetricUnitsAndTree(t *testing.T) {
	b, err := json.Marshal([]MetricUnit{
		{Metric: "score", Datatype: MetricContinuous},
		{Metric: "level", Datatype: MetricCategorical, AllowedValues: []string{"a"}},
		{GroupClass: "lone"},
		{GroupClass: "quiz", AllowedKeys: []string{"q1"}, Attributes: []MetricUnit{{Metric: "time", Datatype: MetricContinuous}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"metric":"score","datatype":"continuous"},{"metric":"level","datatype":"categorical","allowedValues":["a"]},{"groupClass":"lone","allowedKeys":[],"attributes":[]},{"groupClass":"quiz","allowedKeys":["q1"],"attributes":[{"metric":"time","datatype":"continuous"}]}]`
	if string(b) != want {
		t.Errorf("units:\n got %s\nwant %s", b, want)
	}
	var trees []MetricNode
	tree := `[{"key":"level","children":[],"metadata":{"type":"categorical"},"allowedData":[1,"2"],"context":["c"]},
	  {"key":"quiz","children":[{"key":"q1","children":[{"key":"time","children":[],"metadata":{"type":"continuous"},"allowedData":null,"context":null}],"metadata":{"type":"continuous"}}],"metadata":{"type":"continuous"},"context":["c"]}]`
	if err := json.Unmarshal([]byte(tree), &trees); err != nil {
		t.Fatal(err)
	}
	got := FlattenMetrics(trees)
	wantM := []Metric{
		{Key: "level", Type: "categorical", Allowed: []string{"1", "2"}, Context: []string{"c"}},
		{Key: "quiz@__@q1@__@time", Type: "continuous", Context: []string{}},
	}
	if d := cmp.Diff(wantM, got); d != "" {
		t.Errorf("flattened (-want +got):\n%s", d)
	}
	if got[1].Group() != "quiz" || got[0].Group() != "" {
		t.Errorf("groups: %q %q", got[1].Group(), got[0].Group())
	}
}

func TestLogRefusesWhatUpGradeRefuses(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1/api", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{"", true, nil, map[string]any{}} {
		_, err := c.Log(t.Context(), "u1", []LogEntry{{Timestamp: "2026-01-01T00:00:00Z", Attributes: map[string]any{"score": v}}})
		if CategoryOf(err) != CategoryValidation {
			t.Errorf("value %#v: %v, want a validation error", v, err)
		}
	}
	if _, err := c.Log(t.Context(), "", nil); CategoryOf(err) != CategoryValidation {
		t.Errorf("no user: %v", err)
	}
	if _, err := c.Analyse(t.Context(), []string{"not-a-uuid"}); CategoryOf(err) != CategoryValidation {
		t.Errorf("non-UUID query id: %v", err)
	}
	if _, err := c.EnrollmentByDate(t.Context(), "e", "last_week", 0); CategoryOf(err) != CategoryValidation {
		t.Errorf("bad range: %v", err)
	}
}
