package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// helpExampleSkips are the --help example lines the test cannot run, and
// why; every other line runs as written.
var helpExampleSkips = map[string]string{
	`echo "list running experiments" | upgrade-agent ask -o json -`:                          "a shell pipe (ask.txtar reads a message from stdin)",
	`source <(upgrade-agent completion bash)`:                                                "shell process substitution",
	`upgrade-agent completion fish > ~/.config/fish/completions/upgrade-agent.fish`:          "writes into the home folder",
	`upgrade-agent sim serve --addr 127.0.0.1:3030 --data sim.json`:                          "serves until interrupted (sim_serve.txtar runs it)",
	`upgrade-agent --store postgres://agent@db.example/upgrade sessions import session.json`: "needs that database (docs/teams.md's set-up runs against one)",
	`upgrade-agent eval --model gpt-4.1-mini --trials 5`:                                     "needs a real model and its key (eval.txtar runs eval with scripted models)",
	`upgrade-agent eval evals --price-in 0.4 --price-out 1.6 --out eval-out/`:                "needs a real model and its key (eval.txtar runs eval with scripted models)",
	`upgrade-agent eval --llm script:pipeline/eval/testdata/perfect.yaml --trials 2 -o json`: "needs the repository's bundled suite and script (pipeline/eval's tests run them)",
	`upgrade-agent stratification upload prior.csv --yes`:                                    "needs its CSV file (stratification.txtar runs upload, show and rm)",
	`upgrade-agent stratification show prior`:                                                "needs the factor an upload makes (stratification.txtar)",
	`upgrade-agent stratification rm prior --yes`:                                            "needs the factor an upload makes (stratification.txtar)",
	`upgrade-agent experiments import math-hints.json --yes`:                                 "makes a twin of Math Hints that later examples would find twice (experiments_export_import.txtar runs it)",
	`upgrade-agent flags import hint-panel.json --yes`:                                       "needs its export file (flags_segments_import.txtar runs flags import)",
	`upgrade-agent segments import pilot.json --yes`:                                         "needs its export file (flags_segments_import.txtar runs segments import)",
}

// helpExampleCodes are the exit codes of the example lines that do not
// exit 0, as the state the test prepares makes them.
var helpExampleCodes = map[string]int{
	`upgrade-agent ask "create Math Hints in assign-prog, 50/50"`: 10, // the scripted model proposes
	`upgrade-agent resume 3f2a9c1b7d0e --answer "no, use 60/40"`:  10, // a change: a new proposal awaits a yes
	`upgrade-agent undo 5e1d07a2c9b3`:                             10, // proposed: awaits a yes
}

// helpExampleBefore sets the scene for an example that needs a session in
// a state the examples before it have moved on from.
var helpExampleBefore = map[string]string{
	`upgrade-agent resume --wait --timeout 10m`: "exits 11 upgrade-agent ask --yes --wait-jobs 0 --llm script:balance60.yaml 'simulate 60 students on Math Hints'\n",
	// The examples between reseed the simulator: a change of the data as it is.
	`upgrade-agent undo 5e1d07a2c9b3`: mkChange,
}

const mkChange = "exec upgrade-agent ask --yes --llm script:mkflag.yaml 'create the flag UNDO_DEMO'\nexec upgrade-agent changes list -o json\nchangeid stdout\n"

// helpPlaceholders are the ids the examples show, per command, and the
// variables of the objects the test makes.
var helpPlaceholders = []struct{ cmd, id, v string }{
	{"upgrade-agent experiments", "6c31", "$EXP"},
	{"upgrade-agent experiments", "3f2a", "$EXP"},
	{"upgrade-agent flags", "6c31", "$FLAG"},
	{"upgrade-agent segments", "0af2", "$SEG"},
	{"upgrade-agent sessions rm", "7c1e", "$SESSION2"},
	{"upgrade-agent changes", "5e1d07a2c9b3", "$CHANGE"},
	{"upgrade-agent changes", "5e1d", "$CHANGE"},
	{"upgrade-agent undo", "5e1d07a2c9b3", "$CHANGE"},
	{"upgrade-agent undo", "5e1d", "$CHANGE"},
}

var examplePrompt = regexp.MustCompile(`^\s+`)

// TestHelpExamplesRun: every example of every command's --help runs as
// written, on sample data, sessions and a job the test makes first, with
// the ids the examples show standing for them.
func TestHelpExamplesRun(t *testing.T) {
	t.Parallel() // a long script of its own: beside the other scripts
	root := NewRootCmd(NewFactory(&IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, func(string) string { return "" }))
	type example struct{ cmd, line string }
	var examples []example
	for _, c := range leafCommands(root) {
		for _, l := range strings.Split(c.Example, "\n") {
			if l = strings.TrimSpace(examplePrompt.ReplaceAllString(l, "")); l != "" {
				examples = append(examples, example{c.CommandPath(), l})
			}
		}
	}
	// Removing sessions comes last: the other examples read them.
	sort.SliceStable(examples, func(i, j int) bool {
		return examples[i].cmd != "upgrade-agent sessions rm" && examples[j].cmd == "upgrade-agent sessions rm"
	})
	srv, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	upgradeAddr := strings.TrimSuffix(strings.TrimPrefix(srv.URL(), "http://"), "/api")

	var script strings.Builder
	script.WriteString(helpPreamble)
	ran := 0
	for _, ex := range examples {
		if _, ok := helpExampleSkips[ex.line]; ok {
			continue
		}
		line := ex.line
		for _, p := range helpPlaceholders {
			if strings.HasPrefix(ex.cmd, p.cmd) {
				line = regexp.MustCompile(`\b`+p.id+`\b`).ReplaceAllLiteralString(line, p.v)
			}
		}
		line = strings.NewReplacer("127.0.0.1:3030", upgradeAddr, "localhost:3030", upgradeAddr).Replace(line)
		redirect := ""
		if i := strings.Index(line, " > "); i >= 0 {
			line, redirect = line[:i], strings.TrimSpace(line[i+3:])
		}
		if c, ok := helpExampleCodes[ex.line]; ok {
			line += fmt.Sprintf("   # exit %d", c)
		}
		cmds, err := docCommands(line)
		if err != nil {
			t.Errorf("%s: example %q: %v", ex.cmd, ex.line, err)
			continue
		}
		fmt.Fprintf(&script, "\n# %s: %s\n%s%s", ex.cmd, ex.line, helpExampleBefore[ex.line], cmds)
		if redirect != "" {
			fmt.Fprintf(&script, "cp stdout %s\n", redirect)
		}
		ran++
	}
	if ran < 60 {
		t.Fatalf("ran %d examples, want every one not skipped", ran)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "help.txtar"), []byte(script.String()+helpFiles), 0o600); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			if err := scriptSetup(env); err != nil {
				return err
			}
			env.Setenv("OPENAI_API_KEY", "")
			env.Setenv("OPENAI_BASE_URL", "")
			// A scenarios/ folder of a few of the repository's, with their
			// golden files: copies, since scenario run --update rewrites
			// them, and few, since the examples run the folder four times.
			for _, name := range []string{"demo", "create-progressive", "create-group-consistency"} {
				for _, f := range []string{"scenarios/" + name + ".yaml", "golden/" + name + ".txt"} {
					data, err := os.ReadFile(filepath.Join(repo, f))
					if err != nil {
						return err
					}
					if err := os.MkdirAll(filepath.Join(env.WorkDir, filepath.Dir(f)), 0o755); err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(env.WorkDir, f), data, 0o644); err != nil {
						return err
					}
				}
			}
			return nil
		},
		Cmds: scriptCmds,
	})
}

// helpPreamble makes what the examples talk about: the sample data (its
// Math Hints experiment, MATH_HINTS flag and pilot schools segment), a
// paused scenario kept by CI, two sessions awaiting a yes and, the most
// recent, one waiting on a job; the ids go into variables.
const helpPreamble = `exec upgrade-agent sim seed
exec upgrade-agent experiments list -o json
cp stdout exps.json
firstid exps.json EXP
exec upgrade-agent flags show MATH_HINTS -o json
cp stdout flag.json
firstid flag.json FLAG
exec upgrade-agent segments show 'pilot schools' -o json
cp stdout seg.json
firstid seg.json SEG
` + mkChange + `exec upgrade-agent scenario run --keep-state kept handoff.yaml
exits 10 upgrade-agent ask --llm script:propose.yaml 'delete Tutorbot Pilot'
exits 10 upgrade-agent ask --llm script:propose.yaml 'delete Tutorbot Pilot'
exits 11 upgrade-agent ask --yes --wait-jobs 0 --llm script:balance.yaml 'simulate 5000 students on Math Hints'
exec upgrade-agent sessions list -o json
cp stdout s.json
secondsession s.json
env UPGRADE_AGENT_LLM=script:model.yaml
`

const helpFiles = `
-- mkflag.yaml --
- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: create a flag, reasoning: asked}
- call:
    set_action_needed: {action: create_feature_flag, reasoning: asked}
    set_action_params: {action_params: {name: Undo demo, key: UNDO_DEMO, context: assign-prog}}
- reply: Created it.
-- handoff.yaml --
name: handoff
setup:
  experiments:
    - {name: Math Hints, context: assign-prog, status: enrolling,
       conditions: [{code: control, weight: 50}, {code: variant, weight: 50}],
       decision_points: [{site: SelectSection, target: absolute_value_plot_equality}]}
steps:
  - say: Delete the Math Hints experiment
    llm:
      - call: {analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: delete Math Hints, reasoning: destructive}}
      - call: {find_experiment: {name: Math Hints}}
      - call:
          set_action_needed: {action: delete_experiment, reasoning: asked}
          set_action_params: {action_params: {experiment_id: "{{experiment:Math Hints}}"}}
    expect: {status: awaiting_confirmation, exit_code: 10}
-- balance.yaml --
- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: balance test, reasoning: simulate students}
- call:
    set_action_needed: {action: test_condition_balance, reasoning: asked}
    set_action_params: {action_params: {num_users: 5000, context: assign-prog, site: SelectSection, target: absolute_value_plot_equality}}
-- balance60.yaml --
- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: balance test, reasoning: simulate students}
- call:
    set_action_needed: {action: test_condition_balance, reasoning: asked}
    set_action_params: {action_params: {num_users: 60, context: assign-prog, site: SelectSection, target: absolute_value_plot_equality}}
- reply: The balance test ran.
-- propose.yaml --
- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: delete Tutorbot Pilot, reasoning: destructive}
- call:
    set_action_needed: {action: delete_experiment, reasoning: asked}
    set_action_params: {action_params: {experiment_id: Tutorbot Pilot}}
-- model.yaml --
- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: create an experiment, reasoning: new experiment}
- call:
    set_action_needed: {action: create_experiment, reasoning: asked}
    set_action_params: {action_params: {name: Reading Tutor, context: mathstream, conditions: [{code: question-hint-default, weight: 50}, {code: question-hint-tutorbot, weight: 50}], decision_points: [{site: lesson-stream, target: question-hint}]}}
- reply: Done.
- reply: Done.
`
