//go:build unix

package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// TestFlagActionsEndToEnd runs the ten feature-flag and segment actions
// through the CLI in this process (ask: proposed by a scripted model and
// shown as a plan, exit 10; ask --session ID yes: executed), and after each
// one reads the server with the client to check that it holds what was
// approved. Between the writes it runs flags list|show|explain (explain
// compared with what POST /v6/featureflag serves the same user and session
// groups), segments list|show, and experiments history|show on an
// experiment started and stopped by the agent.
//
// It always runs against the embedded simulator served on loopback and,
// when UPGRADE_REAL_URL is set (e.g. http://127.0.0.1:3030/api), against
// that real UpGrade 6.5 server too. There it creates only things named
// realflags-test-... (keys REALFLAGS_TEST_...), deletes what an earlier
// run left, and deletes what it made at the end. The explain probes record
// exposures, which the server keeps.
func TestFlagActionsEndToEnd(t *testing.T) {
	t.Run("simulator", func(t *testing.T) {
		srv, err := sim.Start(sim.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		runFlagActions(t, srv.URL())
	})
	t.Run("real", func(t *testing.T) {
		u := strings.TrimRight(os.Getenv("UPGRADE_REAL_URL"), "/")
		if u == "" {
			t.Skip("UPGRADE_REAL_URL not set: no real UpGrade server (see docs/simulator.md)")
		}
		runFlagActions(t, u)
	})
}

const (
	realName = "realflags-test-" // segments, flags' names, the experiment
	realKey  = "REALFLAGS_TEST_" // flag keys
)

// flagDriver runs the CLI against one server with a scripted model.
type flagDriver struct {
	t   *testing.T
	api *upgrade.Client
	llm *llmtest.Server
	env []string
}

func runFlagActions(t *testing.T, apiURL string) {
	api, err := upgrade.New(upgrade.Config{BaseURL: apiURL, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ls := llmtest.NewServer(nil)
	t.Cleanup(ls.Close)
	d := &flagDriver{t: t, api: api, llm: ls, env: agentEnv(t,
		"UPGRADE_AGENT_HOME="+filepath.Join(t.TempDir(), "state"), "UPGRADE_API_URL="+apiURL,
		"UPGRADE_AGENT_LLM=openai", "OPENAI_BASE_URL="+ls.URL(), "OPENAI_API_KEY=sk-realflags-test-0123456789",
		"UPGRADE_AGENT_MODEL=m")}
	d.cleanup()
	t.Cleanup(d.cleanup)

	segA, segB, segC := realName+"seg-a", realName+"seg-b", realName+"seg-c"
	keyOne, keyTwo := realKey+"ONE", realKey+"TWO"

	// create_segment: users and groups; then one with a sub-segment.
	d.act("create_segment", map[string]any{"name": segA, "context": "assign-prog", "users": []string{"u1", "u2"}, "groups": []string{"classId:c7"}},
		`2 users "u1", "u2"`, `classId "c7"`)
	a := d.segment(segA)
	d.wantSegment(a, upgrade.SegmentPublic, []string{"u1", "u2"}, []string{"classId=c7"}, nil)
	d.act("create_segment", map[string]any{"name": segB, "context": "assign-prog", "users": []string{"u9"}, "segment_ids": []string{segA}},
		segA)
	b := d.segment(segB)
	d.wantSegment(b, upgrade.SegmentPublic, []string{"u9"}, nil, []string{a.ID})

	// create_feature_flag with a list of each member kind.
	d.act("create_feature_flag", map[string]any{"name": realName + "one", "key": keyOne, "context": "assign-prog", "status": "enabled",
		"include_lists": []any{map[string]any{"users": []string{"u1", "u2"}}, map[string]any{"groups": []string{"classId:c7"}},
			map[string]any{"segment_ids": []string{segB}}},
		"exclude_lists": map[string]any{"users": []string{"u5"}}},
		`Create feature flag "`+realName+`one" with key "`+keyOne+`"`)
	one := d.flag(keyOne)
	d.wantFlag(one, realName+"one", "enabled", upgrade.FilterExcludeAll, "assign-prog")
	d.wantLists(one.Inclusion, "on users=u1,u2", "on groups=classId=c7", "on subs="+b.ID)
	d.wantLists(one.Exclusion, "on users=u5")

	// The read commands, and explain against the server's own answer.
	var list []readmodel.FlagSummary
	d.readJSON(&list, "flags", "list")
	if i := slices.IndexFunc(list, func(f readmodel.FlagSummary) bool { return f.Key == keyOne }); i < 0 ||
		list[i].IncludeEnabled != 3 || list[i].IncludeTotal != 3 || list[i].ExcludeTotal != 1 {
		t.Errorf("flags list: %s missing or with the wrong list counts: %+v", keyOne, list)
	}
	var shown readmodel.FlagDetails
	d.readJSON(&shown, "flags", "show", keyOne)
	if shown.ID != one.ID || len(shown.Include) != 3 || len(shown.Exclude) != 1 {
		t.Errorf("flags show %s: %+v", keyOne, shown)
	}
	d.lookups([]llmtest.Call{
		llmtest.NewCall("get_feature_flags", map[string]any{"context": "assign-prog", "key": keyOne}),
		llmtest.NewCall("find_feature_flag", map[string]any{"name_or_key": strings.ToLower(keyOne)}),
		llmtest.NewCall("get_feature_flag_details", map[string]any{"flag_id": keyOne}),
		llmtest.NewCall("get_segments", map[string]any{"context": "assign-prog"}),
		llmtest.NewCall("find_segment", map[string]any{"name": segB}),
		llmtest.NewCall("get_segment_details", map[string]any{"segment_id": segA}),
		llmtest.NewCall("explain_feature_flag", map[string]any{"flag_id": keyOne, "user_id": "u2"}),
	}, map[string][]string{
		"get_feature_flags":        {`"key":"` + keyOne + `"`},
		"find_feature_flag":        {one.ID},
		"get_feature_flag_details": {`"users":["u1","u2"]`, `"name":"` + segB + `"`},
		"get_segments":             {segA, segB},
		"find_segment":             {b.ID, `"users":["u9"]`},
		"get_segment_details":      {`"name":"` + realName + `one"`, `"via":["` + segB + `"]`},
		"explain_feature_flag":     {`"served":true`, `"rule":"user_included"`},
	})
	d.explain(keyOne, map[string]bool{"u1": true, "u5": false, "u9": true, "zz classId=c7": true,
		"u5 classId=c7": false, "zz classId=c8": false, "zz schoolId=c7": false})

	// update_feature_flag: fields; a context change on a flag with lists
	// is refused before the server sees it.
	d.act("update_feature_flag", map[string]any{"flag_id": keyOne, "name": realName + "one renamed", "description": "some text", "tags": []string{"t1", "t2"}},
		"Update feature flag")
	one = d.flag(keyOne)
	d.wantFlag(one, realName+"one renamed", "enabled", upgrade.FilterExcludeAll, "assign-prog")
	if one.Description != "some text" || !slices.Equal(one.Tags, []string{"t1", "t2"}) || len(one.Inclusion) != 3 {
		t.Errorf("after update_feature_flag: description %q, tags %v, %d include lists", one.Description, one.Tags, len(one.Inclusion))
	}
	d.refused("update_feature_flag", map[string]any{"flag_id": keyOne, "context": "livehint-ai"}, "UpGrade drops every list")
	if f := d.flag(keyOne); f.ContextName() != "assign-prog" || len(f.Inclusion) != 3 || len(f.Exclusion) != 1 {
		t.Errorf("the refused context change touched the flag: %v, %d+%d lists", f.Context, len(f.Inclusion), len(f.Exclusion))
	}
	// filter_mode alone goes through PATCH /flags/filterMode.
	d.act("update_feature_flag", map[string]any{"flag_id": keyOne, "filter_mode": "includeAll"}, "includeAll")
	d.wantFlag(d.flag(keyOne), realName+"one renamed", "enabled", upgrade.FilterIncludeAll, "assign-prog")

	// update_feature_flag_status.
	d.act("update_feature_flag_status", map[string]any{"flag_id": keyOne, "status": "disabled"}, "enabled -> disabled")
	d.wantFlag(d.flag(keyOne), realName+"one renamed", "disabled", upgrade.FilterIncludeAll, "assign-prog")

	// add_feature_flag_list: users, groups (off), segments.
	d.act("add_feature_flag_list", map[string]any{"flag_id": keyOne, "kind": "exclude", "users": []string{"u6", "u7"}}, "Add an exclude list")
	d.act("add_feature_flag_list", map[string]any{"flag_id": keyOne, "kind": "exclude", "groups": []any{map[string]any{"type": "schoolId", "group_id": "s1"}}, "enabled": false},
		"Add an exclude list")
	d.act("add_feature_flag_list", map[string]any{"flag_id": keyOne, "kind": "exclude", "segment_ids": []string{segA}}, "Add an exclude list")
	one = d.flag(keyOne)
	d.wantLists(one.Exclusion, "on users=u5", "on users=u6,u7", "off groups=schoolId=s1", "on subs="+a.ID)

	// update_feature_flag_list: the kind given replaces, enabled flips.
	users := d.listWith(one.Exclusion, "users=u6,u7")
	groups := d.listWith(one.Exclusion, "groups=schoolId=s1")
	segs := d.listWith(d.flag(keyOne).Inclusion, "subs="+b.ID)
	d.act("update_feature_flag_list", map[string]any{"flag_id": keyOne, "kind": "exclude", "list_id": users, "users": []string{"u6", "u8"}, "enabled": false},
		"enabled: true -> false")
	d.act("update_feature_flag_list", map[string]any{"flag_id": keyOne, "kind": "exclude", "list_id": groups, "groups": []string{"schoolId:s1", "schoolId:s2"}, "enabled": true},
		"enabled: false -> true")
	d.act("update_feature_flag_list", map[string]any{"flag_id": keyOne, "kind": "include", "list_id": segs, "segment_ids": []string{segB, segA}},
		"Update the include list")
	one = d.flag(keyOne)
	d.wantLists(one.Exclusion, "on users=u5", "off users=u6,u8", "on groups=schoolId=s1,schoolId=s2", "on subs="+a.ID)
	d.wantLists(one.Inclusion, "on users=u1,u2", "on groups=classId=c7", "on subs="+strings.Join(sorted(a.ID, b.ID), ","))

	// remove_feature_flag_list.
	u5 := d.listWith(one.Exclusion, "users=u5")
	d.act("remove_feature_flag_list", map[string]any{"flag_id": keyOne, "kind": "exclude", "list_id": u5}, "remove the exclude list")
	one = d.flag(keyOne)
	d.wantLists(one.Exclusion, "off users=u6,u8", "on groups=schoolId=s1,schoolId=s2", "on subs="+a.ID)

	// Explain again, now includeAll with exclusions, enabled.
	d.act("update_feature_flag_status", map[string]any{"flag_id": keyOne, "status": "enabled"}, "disabled -> enabled")
	d.explain(keyOne, map[string]bool{"u1": false, "u6": true, "zz": true, "zz schoolId=s1": false, "zz schoolId=s3": true,
		"u9 schoolId=s2": true, "zz classId=c7 schoolId=s2": false, "u2 classId=c7": false})
	d.explainWorkingGroups(keyOne)

	// update_segment: the add_/remove_ forms, then a whole replacement.
	d.act("update_segment", map[string]any{"segment_id": segA, "add_users": []string{"u3"}, "remove_users": []string{"u1"},
		"add_groups": []string{"classId:c8"}, "remove_groups": []string{"classId:c7"}},
		`+ users "u3"`, `- users "u1"`, "Warning: the segment is used by")
	d.wantSegment(d.segment(segA), upgrade.SegmentPublic, []string{"u2", "u3"}, []string{"classId=c8"}, nil)
	d.act("update_segment", map[string]any{"segment_id": segB, "description": "whole", "tags": []string{"x"},
		"users": []string{"u10", "u11"}, "groups": []string{}, "segment_ids": []string{}}, `- segment "`+segA+`"`)
	b = d.segment(segB)
	d.wantSegment(b, upgrade.SegmentPublic, []string{"u10", "u11"}, nil, nil)
	if b.Description != "whole" || !slices.Equal(b.Tags, []string{"x"}) {
		t.Errorf("%s after the whole update: description %q, tags %v", segB, b.Description, b.Tags)
	}
	d.act("update_segment", map[string]any{"segment_id": segB, "add_segment_ids": []string{segA}}, `+ segment "`+segA+`"`)
	d.wantSegment(d.segment(segB), upgrade.SegmentPublic, []string{"u10", "u11"}, nil, []string{a.ID})

	var segList []readmodel.SegmentSummary
	d.readJSON(&segList, "segments", "list")
	if i := slices.IndexFunc(segList, func(s readmodel.SegmentSummary) bool { return s.Name == segA }); i < 0 ||
		!slices.Contains(segList[i].UsedBy, realName+"one renamed") {
		t.Errorf("segments list: %s missing or not used by the flag: %+v", segA, segList)
	}
	var segShown readmodel.SegmentDetails
	d.readJSON(&segShown, "segments", "show", segA)
	if segShown.ID != a.ID || len(segShown.Uses) == 0 || segShown.Status != upgrade.SegmentUsed {
		t.Errorf("segments show %s: %+v", segA, segShown)
	}

	// delete_segment: unused, then used (allowed, warned; it leaves every
	// list and parent).
	d.act("create_segment", map[string]any{"name": segC, "context": "assign-prog", "groups": []any{map[string]any{"type": "classId", "group_id": "c9"}}})
	c := d.segment(segC)
	d.act("delete_segment", map[string]any{"segment_id": segC}, "delete public segment")
	d.gone(c.ID)
	d.act("delete_segment", map[string]any{"segment_id": segA}, "delete public segment", "Warning: the segment is used by")
	d.gone(a.ID)
	one = d.flag(keyOne)
	d.wantLists(one.Inclusion, "on users=u1,u2", "on groups=classId=c7", "on subs="+b.ID)
	d.wantLists(one.Exclusion, "off users=u6,u8", "on groups=schoolId=s1,schoolId=s2", "on subs=")
	d.wantSegment(d.segment(segB), upgrade.SegmentPublic, []string{"u10", "u11"}, nil, nil)

	// A context change of a flag without lists is allowed.
	d.act("create_feature_flag", map[string]any{"name": realName + "two", "key": keyTwo, "context": "assign-prog", "description": "d", "tags": []string{"a"}},
		`with key "`+keyTwo+`"`)
	d.act("update_feature_flag", map[string]any{"flag_id": keyTwo, "context": "livehint-ai", "filter_mode": "includeAll"}, "livehint-ai")
	two := d.flag(keyTwo)
	d.wantFlag(two, realName+"two", "disabled", upgrade.FilterIncludeAll, "livehint-ai")

	// delete_feature_flag: the flag and its lists go, public segments stay.
	d.act("delete_feature_flag", map[string]any{"flag_id": keyOne}, "delete feature flag")
	d.act("delete_feature_flag", map[string]any{"flag_id": keyTwo}, "delete feature flag")
	for _, id := range []string{one.ID, two.ID} {
		if f, err := d.api.Flag(d.ctx(), id); !isNotFound(err) {
			t.Errorf("flag %s after delete_feature_flag: %+v, %v; want not found", id, f, err)
		}
	}
	usage, err := d.api.Segments(d.ctx())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range append(usage.FlagInclusion, usage.FlagExclusion...) {
		if l.FeatureFlagID == one.ID || l.FeatureFlagID == two.ID {
			t.Errorf("a list of a deleted flag is still used: %+v", l)
		}
	}
	d.wantSegment(d.segment(segB), upgrade.SegmentPublic, []string{"u10", "u11"}, nil, nil)
	d.act("delete_segment", map[string]any{"segment_id": segB}, "delete public segment")
	d.gone(b.ID)

	// An experiment started and stopped: its history.
	exp := realName + "exp"
	d.act("create_experiment", map[string]any{"name": exp, "context": "assign-prog",
		"decision_points": []any{map[string]any{"site": "SelectSection", "target": "analyzing_step_functions"}},
		"conditions":      []any{map[string]any{"code": "control", "weight": 50}, map[string]any{"code": "variant", "weight": 50}}})
	d.act("update_experiment_status", map[string]any{"experiment_id": exp, "status": "enrolling"}, "inactive -> enrolling")
	d.act("update_experiment_status", map[string]any{"experiment_id": exp, "status": "enrollmentComplete"}, "enrolling -> enrollmentComplete")
	var h readmodel.History
	d.readJSON(&h, "experiments", "history", exp)
	var moves []string
	for _, c := range h.Changes {
		moves = append(moves, string(c.From)+">"+string(c.To))
		if _, err := time.Parse(time.RFC3339, c.Time); err != nil {
			t.Errorf("experiments history: time %q: %v", c.Time, err)
		}
	}
	if want := []string{"inactive>enrolling", "enrolling>enrollmentComplete"}; !slices.Equal(moves, want) || h.Status != upgrade.StateEnrollmentComplete {
		t.Errorf("experiments history %s: %s %v, want enrollmentComplete %v", exp, h.Status, moves, want)
	}
	d.lookups([]llmtest.Call{llmtest.NewCall("get_experiment_history", map[string]any{"experiment_id": exp})},
		map[string][]string{"get_experiment_history": {`"from":"inactive","to":"enrolling"`, `"from":"enrolling","to":"enrollmentComplete"`}})
	code, out, errOut := agentIn(t, d.env, "experiments", "show", exp)
	if code != 0 || !strings.Contains(out, "inactive   enrolling") || !strings.Contains(out, "enrolling  enrollmentComplete") {
		t.Errorf("experiments show %s: exit %d, no history table\n%s\n%s", exp, code, out, errOut)
	}
}

func (d *flagDriver) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	d.t.Cleanup(cancel)
	return ctx
}

// cleanup deletes the flags, segments and experiments of this test,
// whether this run or an earlier one made them.
func (d *flagDriver) cleanup() {
	t := d.t
	flags, err := d.api.Flags(d.ctx())
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, f := range flags {
		if strings.HasPrefix(f.Key, realKey) {
			if _, err := d.api.DeleteFlag(d.ctx(), f.ID); err != nil {
				t.Errorf("cleanup: flag %s: %v", f.Key, err)
			}
		}
	}
	segs, err := d.api.Segments(d.ctx())
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, s := range segs.Segments {
		if strings.HasPrefix(s.Name, realName) {
			if _, err := d.api.DeleteSegment(d.ctx(), s.ID); err != nil && !isNotFound(err) {
				t.Errorf("cleanup: segment %s: %v", s.Name, err)
			}
		}
	}
	names, err := d.api.ExperimentNames(d.ctx())
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, e := range names {
		if strings.HasPrefix(e.Name, realName) {
			if _, err := d.api.DeleteExperiment(d.ctx(), e.ID); err != nil {
				t.Errorf("cleanup: experiment %s: %v", e.Name, err)
			}
		}
	}
}

// act has the model propose action with params, checks the plan shown
// (exit 10, each of plan in the message), approves it in the next run and
// checks that it ran once and succeeded.
func (d *flagDriver) act(action string, params map[string]any, plan ...string) {
	d.t.Helper()
	d.actResult(action, params, plan...)
}

// actResult is act returning the action's record.
func (d *flagDriver) actResult(action string, params map[string]any, plan ...string) pipeline.ActionOut {
	t := d.t
	t.Helper()
	d.llm.Reset()
	d.llm.Enqueue(analyzeAction(action), setAction(action, params))
	code, out, errOut := agentIn(t, d.env, "ask", "-o", "json", "please "+action)
	d.verifyLLM(action)
	res := decodeResult(t, out)
	if code != 10 || res.Confirmation == nil || res.Confirmation.Action != action {
		t.Fatalf("%s: exit %d, want 10 with its confirmation\n%s\n%s", action, code, out, errOut)
	}
	for _, p := range plan {
		if !strings.Contains(res.Confirmation.Message, p) {
			t.Errorf("%s: the plan does not say %q:\n%s", action, p, res.Confirmation.Message)
		}
	}
	code, out, errOut = agentIn(t, d.env, "ask", "-o", "json", "--session", res.SessionID, "yes")
	d.verifyLLM(action + " (approved)")
	done := decodeResult(t, out)
	if code != 0 || done.Status != pipeline.StatusCompleted || len(done.Actions) != 1 || done.Actions[0].Status != "success" {
		t.Fatalf("%s approved: exit %d, want one successful action\n%s\n%s", action, code, out, errOut)
	}
	return done.Actions[0]
}

// refused has the model propose action with params and checks that Go
// refuses it (a validation error naming why), with nothing shown or run.
func (d *flagDriver) refused(action string, params map[string]any, why string) {
	t := d.t
	t.Helper()
	d.llm.Reset()
	d.llm.Enqueue(analyzeAction(action), setAction(action, params), llmtest.TextReply("That cannot be done as asked."))
	code, out, errOut := agentIn(t, d.env, "ask", "-o", "json", "please "+action)
	d.verifyLLM(action)
	res := decodeResult(t, out)
	if code != 0 || res.Confirmation != nil || len(res.Actions) != 0 || len(res.Errors) == 0 ||
		res.Errors[0].Type != "validation" || !strings.Contains(res.Errors[0].Message, why) {
		t.Fatalf("%s: exit %d, want a validation error saying %q and nothing run\n%s\n%s", action, code, why, out, errOut)
	}
}

// lookups has the model ask for the gatherer's lookups in one turn and
// checks that each result holds the texts wanted and no error.
func (d *flagDriver) lookups(calls []llmtest.Call, want map[string][]string) {
	t := d.t
	t.Helper()
	d.llm.Reset()
	analyze := llmtest.NewCall("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.9,
		"user_request_summary": "a lookup", "reasoning": "reads", "needs_action": false})
	d.llm.Enqueue(llmtest.CallReply(append([]llmtest.Call{analyze}, calls...)...), llmtest.TextReply("Here is what I found."))
	code, out, errOut := agentIn(t, d.env, "ask", "-o", "json", "tell me about the flags")
	d.verifyLLM("lookups")
	if code != 0 {
		t.Fatalf("lookups: exit %d\n%s\n%s", code, out, errOut)
	}
	reqs := d.llm.Requests()
	var seen strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		seen.WriteString(m.Content + "\n")
	}
	if strings.Contains(seen.String(), `"error"`) {
		t.Errorf("a lookup failed:\n%s", seen.String())
	}
	for _, c := range calls {
		for _, w := range want[c.Name] {
			if !strings.Contains(seen.String(), w) {
				t.Errorf("%s: the responder was not shown %s", c.Name, w)
			}
		}
	}
}

func (d *flagDriver) verifyLLM(step string) {
	d.t.Helper()
	if f := d.llm.Failures(); len(f) > 0 {
		d.t.Fatalf("%s: the scripted model: %v", step, f)
	}
	if n := d.llm.Pending(); n > 0 {
		d.t.Fatalf("%s: %d scripted replies left unused", step, n)
	}
}

func analyzeAction(action string) llmtest.Reply {
	return llmtest.CallReply(llmtest.NewCall("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.95,
		"user_request_summary": action, "reasoning": "an action", "needs_action": true}))
}

func setAction(action string, params map[string]any) llmtest.Reply {
	return llmtest.CallReply(llmtest.NewCall("set_action_needed", map[string]any{"action": action, "reasoning": "asked"}),
		llmtest.NewCall("set_action_params", map[string]any{"action_params": params}))
}

// explainWorkingGroups puts a group on the context's global exclusion for
// the time of the check (and restores it), initialises users with and
// without working groups, and compares flags explain --working-group with
// what /v6/featureflag serves each of them with their stored groups.
func (d *flagDriver) explainWorkingGroups(key string) {
	t := d.t
	t.Helper()
	globals, err := d.api.GlobalSegments(d.ctx())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(globals, func(g upgrade.SegmentRecord) bool { return g.Context == "assign-prog" })
	if i < 0 {
		t.Fatalf("no global exclusion segment for assign-prog among %d", len(globals))
	}
	g := globals[i]
	in := upgrade.SegmentInput{ID: g.ID, Name: g.Name, Description: g.Description, Context: g.Context, Type: g.Type,
		UserIDs: g.UserIDs(), Groups: g.GroupRefs(), SubSegmentIDs: g.SubSegmentIDs()}
	restore := in
	defer func() {
		if _, err := d.api.UpsertSegment(d.ctx(), restore); err != nil {
			t.Errorf("restore the global exclusion: %v", err)
		}
	}()
	gx := realName + "gx"
	in.Groups = append(slices.Clone(in.Groups), upgrade.GroupRef{Type: "classId", GroupID: gx})
	if _, err := d.api.UpsertSegment(d.ctx(), in); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user    string
		group   map[string][]string
		working map[string]string
		args    []string
		want    bool
	}{
		{"w-other", map[string][]string{"classId": {gx, "c9"}}, map[string]string{"classId": "c9"},
			[]string{"--group", "classId=" + gx, "--group", "classId=c9", "--working-group", "classId=c9"}, true},
		{"w-none", map[string][]string{"classId": {"c9"}}, nil, []string{"--group", "classId=c9", "--working-group", "none"}, false},
		{"w-same", map[string][]string{"classId": {gx}}, map[string]string{"classId": gx}, []string{"--group", "classId=" + gx}, false},
		{"w-type", map[string][]string{"schoolId": {"s3"}}, map[string]string{"schoolId": "s3"},
			[]string{"--group", "schoolId=s3", "--working-group", "schoolId=s3"}, true},
	} {
		user := realName + c.user
		if _, err := d.api.Init(d.ctx(), user, upgrade.InitRequest{Group: c.group, WorkingGroup: c.working}); err != nil {
			t.Fatalf("init %s: %v", user, err)
		}
		var got flageval.Result
		d.readJSON(&got, append([]string{"flags", "explain", key, user}, c.args...)...)
		keys, err := d.api.FeatureFlagKeys(d.ctx(), user, upgrade.FeatureFlagRequest{Context: "assign-prog"})
		if err != nil {
			t.Fatalf("featureflag %s: %v", user, err)
		}
		served := slices.Contains(keys, key)
		if got.Served != served || served != c.want {
			t.Errorf("%s for %s %v: flags explain says served=%t (%s), the server served=%t, want %t", key, user, c.args, got.Served, got.Rule, served, c.want)
		}
	}
}

// readJSON runs a read command with -o json and decodes its output.
func (d *flagDriver) readJSON(v any, args ...string) {
	d.t.Helper()
	code, out, errOut := agentIn(d.t, d.env, append(args, "-o", "json")...)
	if code != 0 {
		d.t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		d.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// explain compares, for each "USER [TYPE=ID...]", flags explain with the
// keys POST /v6/featureflag serves with those session groups only, and both
// with the verdict expected.
func (d *flagDriver) explain(key string, cases map[string]bool) {
	t := d.t
	t.Helper()
	for c, want := range cases {
		fields := strings.Fields(c)
		args := []string{"flags", "explain", key, fields[0]}
		groups := map[string][]string{}
		for _, g := range fields[1:] {
			args = append(args, "--group", g)
			gr, err := flageval.ParseGroup(g)
			if err != nil {
				t.Fatal(err)
			}
			groups[gr.Type] = append(groups[gr.Type], gr.GroupID)
		}
		var got flageval.Result
		d.readJSON(&got, args...)
		no := false
		keys, err := d.api.FeatureFlagKeys(d.ctx(), fields[0], upgrade.FeatureFlagRequest{Context: "assign-prog", GroupsForSession: groups, IncludeStoredUserGroups: &no})
		if err != nil {
			t.Fatalf("featureflag %s: %v", c, err)
		}
		served := slices.Contains(keys, key)
		if got.Served != served || served != want {
			t.Errorf("%s for %s: flags explain says served=%t (%s), the server served=%t, want %t", key, c, got.Served, got.Rule, served, want)
		}
	}
}

func (d *flagDriver) flag(key string) *upgrade.FeatureFlag {
	d.t.Helper()
	flags, err := d.api.Flags(d.ctx())
	if err != nil {
		d.t.Fatal(err)
	}
	for _, f := range flags {
		if f.Key == key {
			full, err := d.api.Flag(d.ctx(), f.ID)
			if err != nil {
				d.t.Fatal(err)
			}
			return full
		}
	}
	d.t.Fatalf("no flag with key %s on the server", key)
	return nil
}

func (d *flagDriver) segment(name string) *upgrade.SegmentRecord {
	d.t.Helper()
	all, err := d.api.Segments(d.ctx())
	if err != nil {
		d.t.Fatal(err)
	}
	for _, s := range all.Segments {
		if s.Name == name {
			full, err := d.api.Segment(d.ctx(), s.ID)
			if err != nil {
				d.t.Fatal(err)
			}
			return full
		}
	}
	d.t.Fatalf("no segment named %s on the server", name)
	return nil
}

// gone checks that GET /segments/{id} answers not found.
func (d *flagDriver) gone(id string) {
	d.t.Helper()
	if s, err := d.api.Segment(d.ctx(), id); !isNotFound(err) {
		d.t.Errorf("segment %s after delete_segment: %+v, %v; want not found", id, s, err)
	}
}

func (d *flagDriver) wantFlag(f *upgrade.FeatureFlag, name, status, filter, ctx string) {
	d.t.Helper()
	if f.Name != name || f.Status != status || f.FilterMode != filter || !slices.Equal(f.Context, []string{ctx}) {
		d.t.Errorf("flag %s: %q %s %s %v, want %q %s %s [%s]", f.Key, f.Name, f.Status, f.FilterMode, f.Context, name, status, filter, ctx)
	}
}

func (d *flagDriver) wantSegment(s *upgrade.SegmentRecord, typ string, users, groups, subs []string) {
	d.t.Helper()
	got := segMembers(*s)
	want := "users=" + strings.Join(sorted(users...), ",") + " groups=" + strings.Join(sorted(groups...), ",") + " subs=" + strings.Join(sorted(subs...), ",")
	if s.Type != typ || got != want {
		d.t.Errorf("segment %s: %s %s, want %s %s", s.Name, s.Type, got, typ, want)
	}
}

// wantLists compares lists as "on|off KIND=MEMBERS", in any order; KIND is
// the one member kind a list holds (users, groups or subs).
func (d *flagDriver) wantLists(ls []upgrade.FlagList, want ...string) {
	d.t.Helper()
	var got []string
	for _, l := range ls {
		if l.Segment == nil || l.Segment.Type != upgrade.SegmentPrivate {
			d.t.Errorf("list %s: not a private segment: %+v", l.ID(), l.Segment)
			continue
		}
		state := "off"
		if l.Enabled {
			state = "on"
		}
		got = append(got, state+" "+oneKind(segMembers(*l.Segment)))
	}
	if !slices.Equal(sorted(got...), sorted(want...)) {
		d.t.Errorf("lists: %q, want %q", sorted(got...), sorted(want...))
	}
}

// listWith is the id of the list whose members are m ("users=u1,u2").
func (d *flagDriver) listWith(ls []upgrade.FlagList, m string) string {
	d.t.Helper()
	for _, l := range ls {
		if l.Segment != nil && oneKind(segMembers(*l.Segment)) == m {
			return l.ID()
		}
	}
	d.t.Fatalf("no list holds %s", m)
	return ""
}

func segMembers(s upgrade.SegmentRecord) string {
	var groups, subs []string
	for _, g := range s.Groups {
		groups = append(groups, g.Type+"="+g.GroupID)
	}
	for _, sub := range s.SubSegments {
		subs = append(subs, sub.ID)
	}
	return fmt.Sprintf("users=%s groups=%s subs=%s", strings.Join(sorted(s.UserIDs()...), ","),
		strings.Join(sorted(groups...), ","), strings.Join(sorted(subs...), ","))
}

// oneKind keeps the one non-empty kind of members ("subs=" when none).
func oneKind(m string) string {
	for _, part := range strings.Fields(m) {
		if !strings.HasSuffix(part, "=") {
			return part
		}
	}
	return "subs="
}

func sorted(s ...string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func isNotFound(err error) bool { return upgrade.CategoryOf(err) == upgrade.CategoryNotFound }
