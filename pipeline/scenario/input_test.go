package scenario

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
)

// The tests of issue 15.7, 15.8 and 16.4: hostile scenario files, paths
// that leave the scenario's folder, and the golden default.

const hiStep = "steps:\n  - say: hi\n"

func TestAliasBombRefused(t *testing.T) {
	bomb := hostile.AliasBomb(6, 9)
	tests := []struct{ name, yaml, want string }{
		{"in expect.output", "name: x\n" + hiStep + "    expect: {output: " + bomb + "}\n",
			"f.yaml:4:"},
		{"in a scripted call", "name: x\n" + hiStep + "    llm:\n      - call: {analyze_user_request: " + bomb + "}\n",
			"f.yaml:5:"},
		{"in setup", "name: x\nsetup:\n  experiments:\n    - {name: A, context: assign-prog, description: " + bomb + "}\n" + hiStep,
			"f.yaml:4:"},
		{"cycle", "name: x\n" + hiStep + "    expect: {output: &o {a: *o}}\n", "f.yaml:4:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := hostile.Within(t, 10*time.Second, func() error {
				_, err := Parse([]byte(tt.yaml), "f.yaml")
				return err
			})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want an ErrInvalid starting %q", err, tt.want)
			}
		})
	}
}

func TestLoadRefusesHugeAndNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, []byte("name: x\n"+hiStep+"# "+strings.Repeat("x", 1<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(huge); err == nil || !strings.Contains(err.Error(), "huge.yaml: cannot read: is 1048606 bytes, more than the 1 MiB allowed") {
		t.Fatalf("huge file: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	hostile.FIFO(t, fifo)
	err := hostile.Within(t, 10*time.Second, func() error { _, err := LoadAll([]string{dir}); return err })
	if err == nil || !strings.Contains(err.Error(), "fifo.yaml: cannot read: is a named pipe (FIFO), not a regular file") {
		t.Fatalf("fifo: %v", err)
	}
}

func TestPathsStayInsideTheFolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	tests := []struct {
		name, yaml, want string // want "" = accepted
	}{
		{"relative cassette", "llm: replay:cassettes/x.json\n", ""},
		{"dot-dot that stays inside", "options: {output_schema: schemas/../schemas/x.json}\n", ""},
		{"absolute record", "llm: record:/abs/path.json\n", `s.yaml:2:6: llm: record: /abs/path.json is an absolute path`},
		{"replay upwards", "llm: replay:../../x.json\n", `s.yaml:2:6: llm: replay: ../../x.json leads out of the scenario's folder`},
		{"schema upwards", "options:\n  output_schema: ../../../x\n", `s.yaml:3:18: options.output_schema: ../../../x leads out of the scenario's folder`},
		{"inside then out", "options: {output_schema: schemas/../../x.json}\n", `leads out of the scenario's folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte("name: x\n" + tt.yaml + hiStep)
			_, err := Parse(data, file)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want %q", err, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), "--allow-outside-paths"):
				t.Errorf("the error does not name the flag that allows it: %v", err)
			}
			if _, err := (ParseOptions{AllowOutsidePaths: true}).Parse(data, file); err != nil {
				t.Errorf("refused with AllowOutsidePaths: %v", err)
			}
		})
	}
}

func TestPathsThroughSymlinksStayInside(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	outside, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"cassettes": outside, "linked.json": filepath.Join(outside, "secret.json"), "inner": dir} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "s.yaml")
	for spec, ok := range map[string]bool{
		"record:cassettes/new.json": false, // the folder is a link out; the file does not exist yet
		"replay:linked.json":        false,
		"record:inner/new.json":     true, // a link that stays inside
	} {
		_, err := Parse([]byte("name: x\nllm: "+spec+"\n"+hiStep), file)
		if ok != (err == nil) {
			t.Errorf("llm: %s: error %v, want ok=%v", spec, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "through a symbolic link") {
			t.Errorf("llm: %s: %v", spec, err)
		}
	}
}

func TestGoldenByDefault(t *testing.T) {
	root := string(filepath.Separator)
	for path, want := range map[string]bool{
		filepath.Join(root, "repo", "scenarios", "x.yaml"):          true,
		filepath.Join(root, "repo", "scenarios", "flows", "x.yaml"): true,
		filepath.Join(root, "home", "me", "checks", "x.yaml"):       false,
		filepath.Join(root, "home", "me", "my-scenarios", "x.yaml"): false,
		filepath.Join(root, "home", "me", "scenarios.yaml"):         false,
	} {
		if got := GoldenByDefault(path); got != want {
			t.Errorf("GoldenByDefault(%s) = %v, want %v", path, got, want)
		}
	}
	// An explicit golden: wins either way.
	for path, body := range map[string]string{
		filepath.Join(root, "home", "me", "x.yaml"):        "golden: true\n",
		filepath.Join(root, "repo", "scenarios", "x.yaml"): "golden: false\n",
	} {
		sc, err := Parse([]byte("name: x\n"+body+hiStep), path)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Contains(body, "true"); sc.Golden != want {
			t.Errorf("%s with %q: golden %v", path, body, sc.Golden)
		}
	}
}

// TestUserScenarioNeedsNoGolden: a scenario kept in a folder of the user's
// own passes without a golden transcript (issue 16.4).
func TestUserScenarioNeedsNoGolden(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-checks")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sc := parse(t, dir, "hello.yaml", greetingScenario)
	rep, err := Run(context.Background(), sc, RunOptions{})
	if err != nil || !rep.Passed() {
		t.Fatalf("run: %v %v", err, rep.Failures)
	}
	if rep.GoldenFile != "" {
		t.Errorf("compared with %s", rep.GoldenFile)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "golden")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a golden folder was made: %v", err)
	}
}
