package cmd

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	// sessionid stdout|FILE sets $SESSION to the session_id of an
	// `ask -o json` or `resume -o json` result.
	scriptCmds["sessionid"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: sessionid stdout|FILE")
		}
		data := ts.ReadFile(args[0])
		var res struct {
			SessionID string `json:"session_id"`
		}
		ts.Check(json.Unmarshal([]byte(data), &res))
		if res.SessionID == "" {
			ts.Fatalf("no session_id in %s", args[0])
		}
		ts.Setenv("SESSION", res.SessionID)
	}
}

func init() {
	// sameshape A.json B.json: the first item of the array in A has
	// exactly the fields of the object in B (one shape for list and show).
	scriptCmds["sameshape"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: sameshape LIST.json OBJECT.json")
		}
		var list []map[string]any
		var obj map[string]any
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &list))
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[1])), &obj))
		if len(list) == 0 {
			ts.Fatalf("%s: empty list", args[0])
		}
		if a, b := keys(list[0]), keys(obj); a != b {
			ts.Fatalf("list item fields %s, shown object fields %s", a, b)
		}
	}
	// maxwidth stdout|FILE N: no line is wider than N characters.
	scriptCmds["maxwidth"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: maxwidth stdout|FILE N")
		}
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		for _, line := range strings.Split(ts.ReadFile(args[0]), "\n") {
			if w := utf8.RuneCountInString(line); w > n {
				ts.Fatalf("a line of %d characters, more than %d: %q", w, n, line)
			}
		}
	}
	// firstsession LIST.json sets $SESSION to the first session of a
	// `sessions list -o json` and $PREFIX to its first five characters.
	scriptCmds["firstsession"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: firstsession LIST.json")
		}
		var rows []SessionRow
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &rows))
		if len(rows) == 0 {
			ts.Fatalf("no sessions in %s", args[0])
		}
		ts.Setenv("SESSION", rows[0].ID)
		ts.Setenv("PREFIX", rows[0].ID[:5])
	}
}

func init() {
	// firstjob LIST.json sets $JOB to the first job of a `jobs list -o json`.
	scriptCmds["firstjob"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: firstjob LIST.json")
		}
		var rows []struct {
			ID string `json:"id"`
		}
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &rows))
		if len(rows) == 0 {
			ts.Fatalf("no jobs in %s", args[0])
		}
		ts.Setenv("JOB", rows[0].ID)
	}
	// jsonshape DOC.json GOT.json: GOT has DOC's shape: the same keys in
	// every object, values of the same kinds (null matches anything), the
	// items of arrays compared with the first documented one.
	scriptCmds["jsonshape"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: jsonshape DOC.json GOT.json")
		}
		var doc, got any
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &doc))
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[1])), &got))
		if err := sameShape("$", doc, got, true); err != nil {
			ts.Fatalf("%s does not document the output: %v", args[0], err)
		}
	}
}

// sameShape compares the shape of a documented JSON value with a real one.
// Every real field must be documented; strict, every documented field must
// be there too (in an array, in one item at least: items leave out fields
// that do not apply to them). A documented {} is a map keyed by data.
func sameShape(path string, doc, got any, strict bool) error {
	if doc == nil || got == nil {
		return nil
	}
	switch d := doc.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: documented as an object, is %T", path, got)
		}
		if len(d) == 0 {
			return nil
		}
		for k := range g {
			if _, ok := d[k]; !ok {
				return fmt.Errorf("%s: field %q is not documented (documented: %s)", path, k, keys(d))
			}
		}
		if a, b := keys(d), keys(g); strict && a != b {
			return fmt.Errorf("%s: documented fields %s, real fields %s", path, a, b)
		}
		for k := range g {
			if err := sameShape(path+"."+k, d[k], g[k], strict); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: documented as an array, is %T", path, got)
		}
		if len(d) == 0 {
			return nil
		}
		seen := map[string]any{}
		for i, item := range g {
			if err := sameShape(fmt.Sprintf("%s[%d]", path, i), d[0], item, false); err != nil {
				return err
			}
			if m, ok := item.(map[string]any); ok {
				for k, v := range m {
					seen[k] = v
				}
			}
		}
		// Items may leave out fields that do not apply to them; together
		// they show every documented one.
		if dm, ok := d[0].(map[string]any); ok && strict && len(g) > 0 && len(dm) > 0 {
			if a, b := keys(dm), keys(seen); a != b {
				return fmt.Errorf("%s[]: documented fields %s, real fields %s", path, a, b)
			}
		}
		return nil
	}
	if fmt.Sprintf("%T", doc) != fmt.Sprintf("%T", got) {
		return fmt.Errorf("%s: documented as %T, is %T", path, doc, got)
	}
	return nil
}

func init() {
	// firstid FILE VAR sets $VAR to the id of the object in FILE, or of the
	// first item when FILE holds an array.
	scriptCmds["firstid"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: firstid FILE VAR")
		}
		data := []byte(ts.ReadFile(args[0]))
		var one struct {
			ID string `json:"id"`
		}
		var many []struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(data, &many) == nil && len(many) > 0 {
			one.ID = many[0].ID
		} else {
			ts.Check(json.Unmarshal(data, &one))
		}
		if one.ID == "" {
			ts.Fatalf("no id in %s", args[0])
		}
		ts.Setenv(args[1], one.ID)
	}
	// opensession LIST.json sets $SESSION to the newest session of a
	// `sessions list -o json` that awaits a confirmation or a job, else
	// the newest.
	scriptCmds["opensession"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: opensession LIST.json")
		}
		var rows []SessionRow
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &rows))
		if len(rows) == 0 {
			ts.Fatalf("no sessions in %s", args[0])
		}
		id := rows[0].ID
		for i := len(rows) - 1; i >= 0; i-- {
			if st := rows[i].Status; st == "awaiting_confirmation" || st == "waiting_job" {
				id = rows[i].ID
			}
		}
		ts.Setenv("SESSION", id)
	}
	// secondsession LIST.json sets $SESSION2 to the second session of a
	// `sessions list -o json`.
	scriptCmds["secondsession"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: secondsession LIST.json")
		}
		var rows []SessionRow
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &rows))
		if len(rows) < 2 {
			ts.Fatalf("fewer than two sessions in %s", args[0])
		}
		ts.Setenv("SESSION2", rows[1].ID)
	}
}

func keys(m map[string]any) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}
