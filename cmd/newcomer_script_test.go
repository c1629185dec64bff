package cmd

import (
	"encoding/json"
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

func keys(m map[string]any) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}
