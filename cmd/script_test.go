package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

var update = flag.Bool("update", false, "rewrite the expected output in cmd/testdata/script/*.txtar")

// TestMain lets the test binary stand in for the upgrade-agent binary, so
// the scripts run the real command line in a child process without a
// separate build.
func TestMain(m *testing.M) {
	testscript.Main(stopPostgresAfter{m}, map[string]func(){
		"upgrade-agent": func() {
			code := Execute(childOptions()...)
			if file := os.Getenv(exitFileVar); file != "" && !isJobWorker(os.Args[1:]) {
				// for "exits CODE" after "! exec upgrade-agent ..."
				_ = os.WriteFile(file, []byte(strconv.Itoa(code)), 0o600)
			}
			os.Exit(code)
		},
		"mcp-test-server": mcpTestServerMain,
	})
}

// exitFileVar names the file where each upgrade-agent run of a script
// leaves its exit code.
const exitFileVar = "UPGRADE_AGENT_TEST_EXIT_FILE"

// TestScripts runs cmd/testdata/script/*.txtar. Each script gets:
//
//	UPGRADE_AGENT_HOME  $WORK/state (the embedded simulator keeps its data there)
//	AUTH_URL            an UpGrade that answers 401 to everything
//	DEAD_URL            a loopback URL where nothing listens
//	FREE_PORT           a loopback port that was free a moment ago
//
// and the commands exits, mkexp, enroll and waitport (see scriptCmds).
// `exits CODE` checks the exit code of the previous upgrade-agent run, so
// `! exec upgrade-agent ...` followed by `exits 10` asserts the exact code.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               scriptSetup,
		Cmds:                scriptCmds,
	})
}

func scriptSetup(env *testscript.Env) error {
	env.Setenv("UPGRADE_AGENT_HOME", filepath.Join(env.WorkDir, "state"))
	env.Setenv(exitFileVar, filepath.Join(env.WorkDir, ".exit-code"))

	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"name":"UnauthorizedError","message":"Token is missing","endPoint":%q,"errorCode":401,"type":"UNAUTHORIZED"}`, r.URL.Path)
	}))
	env.Defer(auth.Close)
	env.Setenv("AUTH_URL", auth.URL+"/api")

	for _, name := range []string{"DEAD_URL", "FREE_PORT"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr := ln.Addr().(*net.TCPAddr)
		ln.Close()
		if name == "DEAD_URL" {
			env.Setenv(name, "http://"+addr.String()+"/api")
		} else {
			env.Setenv(name, strconv.Itoa(addr.Port))
		}
	}
	return nil
}

var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// exits CODE checks the exit code of the last upgrade-agent run
	// (exec and ! exec only tell zero from non-zero);
	// exits CODE PROGRAM [ARGS...] runs PROGRAM and checks its exit code.
	"exits": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 1 {
			ts.Fatalf("usage: exits CODE [PROGRAM [ARGS...]]")
		}
		want, err := strconv.Atoi(args[0])
		ts.Check(err)
		got := 0
		if len(args) == 1 {
			file := ts.Getenv(exitFileVar)
			b, err := os.ReadFile(file)
			if err != nil {
				ts.Fatalf("exits: no upgrade-agent run to check (%v)", err)
			}
			ts.Check(os.Remove(file))
			got, err = strconv.Atoi(string(b))
			ts.Check(err)
		} else if err := ts.Exec(args[1], args[2:]...); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				ts.Fatalf("%s: %v", args[1], err)
			}
			got = ee.ExitCode()
		}
		if got != want {
			ts.Fatalf("exit code %d, want %d", got, want)
		}
	},
	// mkexp NAME CONTEXT [STATE] creates an experiment in the embedded
	// simulator's data file, with every condition of the context at equal
	// weight and its first site/target as the decision point.
	"mkexp": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 || len(args) > 3 {
			ts.Fatalf("usage: mkexp NAME CONTEXT [STATE]")
		}
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			meta := upgrade.DefaultContextMetadata()[args[1]]
			e := &upgrade.Experiment{
				Name: args[0], Context: []string{args[1]}, State: upgrade.StateInactive,
				ConsistencyRule: upgrade.ConsistencyIndividual, AssignmentUnit: upgrade.UnitIndividual,
				PostExperimentRule: upgrade.PostRuleContinue, Tags: []string{}, FilterMode: upgrade.FilterIncludeAll,
				Type: upgrade.TypeSimple, AssignmentAlgorithm: upgrade.AlgorithmRandom,
			}
			for i, code := range meta.Conditions {
				e.Conditions = append(e.Conditions, upgrade.Condition{
					ID: fmt.Sprintf("c%d", i), ConditionCode: code, AssignmentWeight: 100 / float64(len(meta.Conditions)), Order: i + 1,
				})
			}
			e.Partitions = []upgrade.DecisionPoint{{ID: "p0", Site: meta.ExpPoints[0], Target: meta.ExpIDs[0], Order: 1}}
			created, err := c.CreateExperiment(ctx, e)
			if err != nil {
				return err
			}
			if len(args) == 3 {
				_, err = c.SetState(ctx, created.ID, upgrade.NormalizeState(args[2]))
			}
			return err
		})
	},
	// seglist NAME KIND SEGMENT adds to experiment NAME an inclusion or
	// exclusion list (KIND) naming public segment SEGMENT, made with one
	// member when new: what the web UI's "segment" list is.
	"seglist": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 3 {
			ts.Fatalf("usage: seglist NAME inclusion|exclusion SEGMENT")
		}
		withSim(ts, func(ctx context.Context, c *upgrade.Client, base string) error {
			e, err := fetchExperiment(ctx, c, args[0])
			if err != nil {
				return err
			}
			seg, err := c.UpsertSegment(ctx, upgrade.SegmentInput{Name: args[2], Context: e.ContextName(), Type: "public",
				UserIDs: []string{"seg-member"}, Groups: []upgrade.GroupRef{}, SubSegmentIDs: []string{}})
			if err != nil {
				return err
			}
			body, err := json.Marshal(map[string]any{"experimentId": e.ID, "list": map[string]any{"name": args[2] + " list",
				"context": e.ContextName(), "type": "private", "userIds": []string{}, "groups": []any{}, "subSegmentIds": []string{seg.ID}}})
			if err != nil {
				return err
			}
			resp, err := http.Post(base+"/experiments/"+args[1]+"List", "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("seglist: %s", resp.Status)
			}
			return nil
		})
	},
	// enroll NAME N marks N new users in the experiment NAME (which must be
	// enrolling) at its first decision point.
	"enroll": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: enroll NAME N")
		}
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			e, err := fetchExperiment(ctx, c, args[0])
			if err != nil {
				return err
			}
			p := e.Partitions[0]
			for i := range n {
				user := fmt.Sprintf("user-%s-%d", e.ID[:8], i)
				if _, err := c.Init(ctx, user, upgrade.InitRequest{}); err != nil {
					return err
				}
				as, err := c.Assign(ctx, user, e.ContextName())
				if err != nil {
					return err
				}
				var cond *upgrade.AssignedCondition
				for _, a := range as {
					if a.Site == p.Site && a.Target == p.Target && len(a.AssignedCondition) > 0 {
						cond = &a.AssignedCondition[0]
					}
				}
				if cond == nil {
					return fmt.Errorf("user %s got no condition at %s/%s", user, p.Site, p.Target)
				}
				_, err = c.Mark(ctx, user, upgrade.MarkRequest{
					Data:   upgrade.MarkData{Site: p.Site, Target: p.Target, AssignedCondition: &upgrade.MarkCondition{ID: cond.ID, ConditionCode: cond.ConditionCode, ExperimentID: e.ID}},
					Status: upgrade.MarkConditionApplied,
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	},
	// waitport PORT waits (up to ten seconds) until something listens on
	// 127.0.0.1:PORT.
	"waitport": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: waitport PORT")
		}
		addr := net.JoinHostPort("127.0.0.1", args[0])
		deadline := time.Now().Add(10 * time.Second)
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				return
			}
			if time.Now().After(deadline) {
				ts.Fatalf("nothing listens on %s: %v", addr, err)
			}
			time.Sleep(20 * time.Millisecond) // polling a child process; there is no event to wait on
		}
	},
}

// withSimClient opens the embedded simulator's data file of the script, as
// the CLI would, and runs fn against it.
func withSimClient(ts *testscript.TestScript, fn func(context.Context, *upgrade.Client) error) {
	withSim(ts, func(ctx context.Context, c *upgrade.Client, _ string) error { return fn(ctx, c) })
}

// withSim is withSimClient that also passes the simulator's base URL.
func withSim(ts *testscript.TestScript, fn func(ctx context.Context, c *upgrade.Client, base string) error) {
	data := filepath.Join(ts.Getenv("UPGRADE_AGENT_HOME"), "sim", "data.json")
	srv, err := sim.Start(sim.Options{DataFile: data})
	ts.Check(err)
	defer func() { ts.Check(srv.Close()) }()
	c, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts.Check(fn(ctx, c, srv.URL()))
}

// isJobWorker: a detached `jobs work` process inherits the exit-code file but
// must not overwrite the code of the run the script checks.
func isJobWorker(args []string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "jobs" && args[i+1] == "work" {
			return true
		}
	}
	return false
}
