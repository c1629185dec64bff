package actions

import (
	"encoding/json"
	"testing"
)

// TestFactorialOrderIsNoChange: a real 6.5 reads a factorial back with
// its factors, levels and level elements in no fixed order; the undo's
// comparison (and its drift check) must not see a change in that, and
// must still see a changed level.
func TestFactorialOrderIsNoChange(t *testing.T) {
	a := `{"id":"e","name":"x","type":"Factorial","factors":[{"name":"Color","order":1,"levels":[{"id":"r","name":"Red","order":1},{"id":"b","name":"Blue","order":2}]},{"name":"Shape","order":2,"levels":[{"id":"c","name":"Circle","order":1}]}],
		"conditions":[{"id":"c1","conditionCode":"c1","assignmentWeight":100,"levelCombinationElements":[{"id":"e1","level":{"id":"r","name":"Red"}},{"id":"e2","level":{"id":"c","name":"Circle"}}]}]}`
	b := `{"id":"e","name":"x","type":"Factorial","factors":[{"name":"Shape","order":2,"levels":[{"id":"c","name":"Circle","order":1}]},{"name":"Color","order":1,"levels":[{"id":"b","name":"Blue","order":2},{"id":"r","name":"Red","order":1}]}],
		"conditions":[{"id":"c1","conditionCode":"c1","assignmentWeight":100,"levelCombinationElements":[{"id":"e2","level":{"id":"c","name":"Circle"}},{"id":"e1","level":{"id":"r","name":"Red"}}]}]}`
	k, ok := kindOf("experiment")
	if !ok {
		t.Fatal("no experiment kind")
	}
	if d := k.diff(json.RawMessage(a), json.RawMessage(b)); len(d) > 0 {
		t.Errorf("the same factorial in another order reads as changed: %+v", d)
	}
	c := `{"id":"e","name":"x","type":"Factorial","factors":[{"name":"Color","order":1,"levels":[{"id":"r","name":"Red","order":1},{"id":"b","name":"Blue","order":2}]},{"name":"Shape","order":2,"levels":[{"id":"c","name":"Circle","order":1}]}],
		"conditions":[{"id":"c1","conditionCode":"c1","assignmentWeight":100,"levelCombinationElements":[{"id":"e1","level":{"id":"b","name":"Blue"}},{"id":"e2","level":{"id":"c","name":"Circle"}}]}]}`
	if d := k.diff(json.RawMessage(a), json.RawMessage(c)); len(d) == 0 {
		t.Error("a condition moved to another level reads as unchanged")
	}
}
