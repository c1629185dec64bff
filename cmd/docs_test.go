package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/upgrade-agent/upgrade-agent/internal/pgtest"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The documentation is a test: every example in README.md and docs/*.md
// runs here as written. A fenced block of a runnable kind (sh, bash, yaml,
// yml, json) must follow a marker comment that says what it is:
//
//	<!-- test: run -->            each line is a command line; "go run ." and
//	                              "upgrade-agent" run the CLI, "export K=V" sets
//	                              the environment, "# exit N" at the end of a
//	                              line ("# exit 2: why" too) is its expected
//	                              exit code (default 0)
//	<!-- test: file NAME -->      the block is the file NAME for later blocks
//	<!-- test: scenario NAME -->  the file NAME, then `scenario run NAME`: exit 0
//	<!-- test: config NAME -->    the file NAME, then `--config NAME sessions list`: exit 0
//	<!-- test: go FILE -->        (a go block) the code is in FILE, a test that runs
//	<!-- test: output CMD -->     (a json block) CMD runs and its stdout has the
//	                              block's shape: the same keys at every level,
//	                              values of the same kinds ({session}, {job} and
//	                              {change} in CMD stand for the first session,
//	                              job and change;
//	                              "# exit N" for another exit code than 0)
//	<!-- test: sql DB -->         (a sql block) runs as the PostgreSQL superuser in
//	                              database DB of the test cluster; a document with
//	                              one runs against that cluster (internal/pgtest),
//	                              localhost:5432 and 127.0.0.1:3030 (an UpGrade)
//	                              standing for the cluster and a simulator the test
//	                              starts
//	<!-- test: skip REASON -->    not run; the reason says why (a live server)
//
// In run lines, the placeholder ids of the examples stand for the newest
// session that awaits an answer or a job, else the newest (3f2a9c1b7d0e,
// 3f2a9c0d1e4b, 3f2a), and the newest job (9d1c).
//	<!-- test: fragment -->       a part of something, not runnable alone
//
// The blocks of one document run in order in one work folder with its own
// state dir; the repository's scenarios/ and golden/ are linked into it.
// The documents may also name only files that ship in the repository.

// docMarker is the comment before a block.
var docMarker = regexp.MustCompile(`^<!--\s*test:\s*(\S+)\s*(.*?)\s*-->$`)

var fence = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")

var runnableLang = map[string]bool{"sh": true, "bash": true, "yaml": true, "yml": true, "json": true, "sql": true}

type docBlock struct {
	line       int
	lang, kind string
	arg        string
	body       string
}

// docBlocks returns the fenced blocks of a Markdown file with the marker
// before each ("" when none).
func docBlocks(path string) ([]docBlock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	var blocks []docBlock
	marker, markerArg := "", ""
	for i := 0; i < len(lines); i++ {
		trim := strings.TrimSpace(lines[i])
		if m := docMarker.FindStringSubmatch(trim); m != nil {
			marker, markerArg = m[1], m[2]
			continue
		}
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			if trim != "" {
				marker, markerArg = "", ""
			}
			continue
		}
		indent := m[1]
		b := docBlock{line: i + 1, lang: m[2], kind: marker, arg: markerArg}
		marker, markerArg = "", ""
		var body []string
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		b.body = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md")}, files...)
}

// TestDocExamples runs the examples of the documentation.
func TestDocExamples(t *testing.T) {
	dir, teamDir := t.TempDir(), t.TempDir()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	n, team := 0, 0
	for _, path := range docFiles(t) {
		blocks, err := docBlocks(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repo, mustAbs(t, path))
		script, count, errs := docScript(rel, blocks, repo)
		for _, e := range errs {
			t.Error(e)
		}
		if count == 0 {
			continue
		}
		n += count
		to := dir
		if strings.Contains(script, "\npgsql ") {
			to = teamDir // needs PostgreSQL
			team++
		}
		name := strings.NewReplacer("/", "_", ".md", "").Replace(rel) + ".txtar"
		if err := os.WriteFile(filepath.Join(to, name), []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 {
		t.Fatal("no doc examples found")
	}
	setup := func(env *testscript.Env) error {
		if err := scriptSetup(env); err != nil {
			return err
		}
		env.Setenv("OPENAI_API_KEY", "")
		env.Setenv("OPENAI_BASE_URL", "")
		for _, d := range []string{"scenarios", "golden"} {
			if err := os.Symlink(filepath.Join(repo, d), filepath.Join(env.WorkDir, d)); err != nil {
				return err
			}
		}
		return nil
	}
	testscript.Run(t, testscript.Params{Dir: dir, RequireExplicitExec: true, Setup: setup, Cmds: scriptCmds})
	if team > 0 {
		t.Run("team", func(t *testing.T) { runTeamDocs(t, teamDir, setup) })
	}
}

// runTeamDocs runs the documents that set up a team store, against the
// test cluster and a simulator shared by their "machines".
func runTeamDocs(t *testing.T, dir string, setup func(*testscript.Env) error) {
	c := pgtest.Need(t)
	// The documents create these; a cluster reused by -count=N has them.
	for _, q := range []string{"DROP DATABASE IF EXISTS upgrade_agent", "DROP ROLE IF EXISTS upgrade_agent_app", "DROP ROLE IF EXISTS upgrade_agent_owner"} {
		if err := c.Exec("postgres", q); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.URL(), "http://"), "/api")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.NewReplacer("localhost:5432", fmt.Sprintf("127.0.0.1:%d", c.Port), "127.0.0.1:3030", addr).Replace(string(data)))
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmds := map[string]func(*testscript.TestScript, bool, []string){}
	for k, v := range scriptCmds {
		cmds[k] = v
	}
	// pgsql DB FILE runs FILE's statements as the superuser in DB.
	cmds["pgsql"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: pgsql DB FILE")
		}
		for _, stmt := range strings.Split(ts.ReadFile(args[1]), ";") {
			if stmt = strings.TrimSpace(stmt); stmt != "" {
				ts.Check(c.Exec(args[0], stmt))
			}
		}
	}
	testscript.Run(t, testscript.Params{Dir: dir, RequireExplicitExec: true, Setup: setup, Cmds: cmds})
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// docScript turns the blocks of one document into a testscript.
func docScript(doc string, blocks []docBlock, repo string) (script string, count int, errs []error) {
	var cmds strings.Builder
	var files strings.Builder
	fmt.Fprintf(&cmds, "# the examples of %s\n", doc)
	bad := func(b docBlock, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", doc, b.line, fmt.Sprintf(format, args...)))
	}
	addFile := func(b docBlock, name string) bool {
		if name == "" || strings.Contains(name, "..") || filepath.IsAbs(name) {
			bad(b, "test: %s needs a relative file name", b.kind)
			return false
		}
		fmt.Fprintf(&files, "-- %s --\n%s", name, b.body)
		return true
	}
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", doc, b.line)
		switch b.kind {
		case "":
			if runnableLang[b.lang] {
				bad(b, "a ```%s block without a <!-- test: ... --> marker: run it, or say why not (see cmd/docs_test.go)", b.lang)
			}
		case "fragment":
		case "skip":
			if b.arg == "" {
				bad(b, "test: skip needs a reason")
			}
		case "file":
			if addFile(b, b.arg) {
				count++
			}
		case "scenario":
			if addFile(b, b.arg) {
				fmt.Fprintf(&cmds, "\n# %s\nexits 0 upgrade-agent scenario run %s\n", where, quoteArg(b.arg))
				count++
			}
		case "config":
			if addFile(b, b.arg) {
				fmt.Fprintf(&cmds, "\n# %s\nexits 0 upgrade-agent --config %s sessions list\n", where, quoteArg(b.arg))
				count++
			}
		case "go":
			src, err := os.ReadFile(filepath.Join(repo, b.arg))
			if err != nil {
				bad(b, "test: go %s: %v", b.arg, err)
				continue
			}
			if !strings.Contains(squash(string(src)), squash(b.body)) {
				bad(b, "the code of this block is not in %s any more: copy the tested code again", b.arg)
			}
			count++
		case "sql":
			name := fmt.Sprintf(".sql-%d.sql", b.line)
			if b.arg == "" || !addFile(b, name) {
				bad(b, "test: sql needs a database name")
				continue
			}
			fmt.Fprintf(&cmds, "\n# %s\npgsql %s %s\n", where, quoteArg(b.arg), name)
			count++
		case "output":
			name := fmt.Sprintf(".doc-%d.json", b.line)
			if !addFile(b, name) {
				continue
			}
			line, err := outputCommand(b.arg, name)
			if err != nil {
				bad(b, "%v", err)
				continue
			}
			fmt.Fprintf(&cmds, "\n# %s\n%s", where, line)
			count++
		case "run":
			fmt.Fprintf(&cmds, "\n# %s\n", where)
			lines, err := docCommands(b.body)
			if err != nil {
				bad(b, "%v", err)
				continue
			}
			cmds.WriteString(lines)
			count++
		default:
			bad(b, "unknown marker test: %s", b.kind)
		}
	}
	return cmds.String() + "\n" + files.String(), count, errs
}

// squash drops the indentation and blank lines, so a block matches the
// code it was copied from.
func squash(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

var exitComment = regexp.MustCompile(`\s#\s*exit\s+(\d+)\b.*$`)

// docCommands turns the command lines of a run block into script lines.
func docCommands(body string) (string, error) {
	var out strings.Builder
	var joined []string
	cur := ""
	for _, l := range strings.Split(body, "\n") {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		joined = append(joined, cur+l)
		cur = ""
	}
	for _, l := range joined {
		code := "0"
		if m := exitComment.FindStringSubmatch(" " + l); m != nil {
			code = m[1]
			l = exitComment.ReplaceAllString(" "+l, "")
		}
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		words, err := shellWords(l)
		if err != nil {
			return "", fmt.Errorf("%q: %v", l, err)
		}
		var env []string
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			env = append(env, words[0])
			words = words[1:]
		}
		switch {
		case len(words) == 2 && words[0] == "export" && strings.Contains(words[1], "="):
			fmt.Fprintf(&out, "env %s\n", quoteArg(words[1]))
			continue
		case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == ".":
			words = append([]string{"upgrade-agent"}, words[3:]...)
		case len(words) >= 1 && words[0] == "upgrade-agent":
		default:
			return "", fmt.Errorf("%q: only upgrade-agent, go run . and export lines run in a doc example", l)
		}
		for _, e := range env {
			fmt.Fprintf(&out, "env %s\n", quoteArg(e))
		}
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = quoteArg(w)
			if scriptVar.MatchString(w) {
				q[i] = w // set by the test that made the line (help examples)
			}
			switch placeholderIDs[w] {
			case "session":
				out.WriteString("exec upgrade-agent sessions list -o json\ncp stdout .sessions.json\nopensession .sessions.json\n")
				q[i] = "$SESSION"
			case "job":
				out.WriteString("exec upgrade-agent jobs list -o json\ncp stdout .jobs.json\nfirstjob .jobs.json\n")
				q[i] = "$JOB"
			}
		}
		fmt.Fprintf(&out, "exits %s %s\n", code, strings.Join(q, " "))
	}
	return out.String(), nil
}

// outputCommand runs the command of an output marker and compares the
// shape of its stdout with the documented example in file doc.
func outputCommand(cmdline, doc string) (string, error) {
	code := "0"
	if m := exitComment.FindStringSubmatch(" " + cmdline); m != nil {
		code = m[1]
		cmdline = strings.TrimSpace(exitComment.ReplaceAllString(" "+cmdline, ""))
	}
	words, err := shellWords(cmdline)
	if err != nil {
		return "", err
	}
	if len(words) < 2 || words[0] != "upgrade-agent" {
		return "", fmt.Errorf("test: output wants an upgrade-agent command line, got %q", cmdline)
	}
	var out strings.Builder
	if strings.Contains(cmdline, "{session}") {
		out.WriteString("exec upgrade-agent sessions list -o json\ncp stdout .sessions.json\nfirstsession .sessions.json\n")
	}
	if strings.Contains(cmdline, "{job}") {
		out.WriteString("exec upgrade-agent jobs list -o json\ncp stdout .jobs.json\nfirstjob .jobs.json\n")
	}
	if strings.Contains(cmdline, "{change}") {
		out.WriteString("exec upgrade-agent changes list -o json\nchangeid stdout\n")
	}
	q := make([]string, len(words))
	for i, w := range words {
		w = strings.NewReplacer("{session}", "$SESSION", "{job}", "$JOB", "{change}", "$CHANGE").Replace(w)
		if strings.HasPrefix(w, "$") {
			q[i] = w
			continue
		}
		q[i] = quoteArg(w)
	}
	got := strings.TrimSuffix(doc, ".json") + "-got.json"
	fmt.Fprintf(&out, "exits %s %s\ncp stdout %s\njsonshape %s %s\n", code, strings.Join(q, " "), got, doc, got)
	return out.String(), nil
}

var scriptVar = regexp.MustCompile(`^\$[A-Z][A-Z0-9]*$`)

// placeholderIDs are the ids the examples show, and what they stand for.
var placeholderIDs = map[string]string{"3f2a9c1b7d0e": "session", "3f2a9c0d1e4b": "session", "3f2a": "session", "9d1c": "job"}

// shellWords splits a command line as sh does for the quoting the docs use.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// quoteArg quotes a word for testscript.
func quoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t'\"#$") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// specPath finds mentions of the specification, which does not ship.
var specPath = regexp.MustCompile(`(^|[\s(\x60"'])spec/[a-z-]+\.md`)

// mdLink finds relative Markdown links.
var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

// TestDocsNameOnlyShippedFiles: the documents point at files a reader has.
func TestDocsNameOnlyShippedFiles(t *testing.T) {
	for _, path := range docFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if specPath.MatchString(line) {
				t.Errorf("%s:%d: names the specification (spec/...), which does not ship with the repository: %s", path, i+1, strings.TrimSpace(line))
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
					t.Errorf("%s:%d: link to %s: %v", path, i+1, target, err)
				}
			}
		}
	}
}

// TestDocScriptRules: unmarked runnable blocks, skips without a reason and
// unknown markers are errors; command lines become script lines.
func TestDocScriptRules(t *testing.T) {
	blocks := []docBlock{
		{line: 1, lang: "yaml", body: "a: 1\n"},
		{line: 5, lang: "sh", kind: "skip", body: "x\n"},
		{line: 9, lang: "sh", kind: "bogus", body: "x\n"},
		{line: 13, lang: "go", body: "x := 1\n"},
		{line: 17, lang: "sh", kind: "run", body: "export A=b\ngo run . resume --answer \"yes please\"   # exit 10\nupgrade-agent sessions list  # the list\n"},
	}
	script, count, errs := docScript("doc.md", blocks, "..")
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{"doc.md:1: a ```yaml block without a <!-- test: ... --> marker", "doc.md:5: test: skip needs a reason", "doc.md:9: unknown marker test: bogus"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q lack %q", got, want)
		}
	}
	if count != 1 {
		t.Errorf("count = %d, want 1 (the run block)", count)
	}
	for _, want := range []string{"env A=b\n", "exits 10 upgrade-agent resume --answer 'yes please'\n", "exits 0 upgrade-agent sessions list\n"} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if _, err := docCommands("rm -rf /\n"); err == nil {
		t.Error("a line that is not upgrade-agent, go run . or export was accepted")
	}
}

// TestJSONDocCoversEveryCommand: every command that takes -o json has an
// example in docs/json.md that the doc test checks against its output
// (jobs cancel answers with the record jobs show prints, documented there).
func TestJSONDocCoversEveryCommand(t *testing.T) {
	blocks, err := docBlocks(filepath.Join("..", "docs", "json.md"))
	if err != nil {
		t.Fatal(err)
	}
	var checked []string
	for _, b := range blocks {
		if b.kind == "output" {
			checked = append(checked, b.arg)
		}
	}
	sameAs := map[string]string{"upgrade-agent jobs cancel": "upgrade-agent jobs show"}
	root := NewRootCmd(NewFactory(&IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, func(string) string { return "" }))
	for _, c := range leafCommands(root) {
		if !oneOf("json", supportedOutputs(c)) {
			continue
		}
		path := c.CommandPath()
		if p, ok := sameAs[path]; ok {
			path = p
		}
		found := false
		for _, cmd := range checked {
			if strings.HasPrefix(cmd, path+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/json.md has no checked example of %s -o json (<!-- test: output %s ... -o json -->)", c.CommandPath(), path)
		}
	}
}
