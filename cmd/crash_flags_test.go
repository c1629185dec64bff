//go:build unix

package cmd

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The flag and segment writes under TestCrashConfirmedWrites: a segment
// created (its id derives from the confirmation), a flag created with a
// list (found again by key and context), a list added to a flag (its id
// derives from the confirmation) and a flag's status changed, each killed at every
// kill point and resumed until done, must reach UpGrade exactly once.

const proposeCreateSegment = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: create the crash segment, reasoning: action}
- call:
    set_action_needed: {action: create_segment, reasoning: asked}
    set_action_params: {action_params: {name: crash seg, context: assign-prog, users: [u1, u2]}}
- reply: About to create the crash segment.
`

const proposeAddList = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: give CRASH_FLAG to class c7, reasoning: action}
- call:
    set_action_needed: {action: add_feature_flag_list, reasoning: asked}
    set_action_params: {action_params: {flag_id: crash_flag, kind: include, groups: ["classId:c7"]}}
- reply: About to add class c7.
`

const proposeCreateFlag = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: create CRASH_NEW for u1, reasoning: action}
- call:
    set_action_needed: {action: create_feature_flag, reasoning: asked}
    set_action_params: {action_params: {name: Crash new, key: CRASH_NEW, context: assign-prog, status: enabled, include_lists: {users: [u1]}}}
- reply: About to create CRASH_NEW.
`

const proposeFlagStatus = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: turn CRASH_FLAG on, reasoning: action}
- call:
    set_action_needed: {action: update_feature_flag_status, reasoning: asked}
    set_action_params: {action_params: {flag_id: CRASH_FLAG, status: enabled}}
- reply: About to turn CRASH_FLAG on.
`

func init() {
	noSimCheck := func(*testing.T, *sim.Sim) {}
	crashWrites = append(crashWrites,
		crashWrite{name: "create segment", propose: proposeCreateSegment, method: http.MethodPost, path: "/segments", check: noSimCheck,
			checkAPI: func(t *testing.T, c *upgrade.Client) {
				all, err := c.Segments(ctxTimeout(t))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, s := range all.Segments {
					if s.Name == "crash seg" {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d segments named crash seg, want exactly 1", n)
				}
			}},
		crashWrite{name: "create flag", propose: proposeCreateFlag, method: http.MethodPost, path: "/flags", check: noSimCheck,
			checkAPI: func(t *testing.T, c *upgrade.Client) {
				all, err := c.Flags(ctxTimeout(t))
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, f := range all {
					if f.Key == "CRASH_NEW" {
						ids = append(ids, f.ID)
					}
				}
				if len(ids) != 1 {
					t.Fatalf("%d flags with key CRASH_NEW, want exactly 1", len(ids))
				}
				f, err := c.Flag(ctxTimeout(t), ids[0])
				if err != nil {
					t.Fatal(err)
				}
				if f.Status != upgrade.FlagEnabled || len(f.Inclusion) != 1 {
					t.Errorf("CRASH_NEW is %s with %d include lists, want enabled with exactly 1", f.Status, len(f.Inclusion))
				}
			}},
		crashWrite{name: "add flag list", propose: proposeAddList, method: http.MethodPost, path: "/flags/inclusionList",
			setup: mkFlag, check: noSimCheck,
			checkAPI: func(t *testing.T, c *upgrade.Client) {
				if f := crashFlag(t, c); len(f.Inclusion) != 1 {
					t.Errorf("CRASH_FLAG has %d include lists, want exactly 1", len(f.Inclusion))
				}
			}},
		crashWrite{name: "flag status", propose: proposeFlagStatus, method: http.MethodPatch, path: "/flags/status",
			setup: mkFlag, check: noSimCheck,
			checkAPI: func(t *testing.T, c *upgrade.Client) {
				if f := crashFlag(t, c); f.Status != upgrade.FlagEnabled {
					t.Errorf("CRASH_FLAG is %s, want enabled", f.Status)
				}
			}},
	)
}

// mkFlag creates the disabled flag CRASH_FLAG in assign-prog.
func mkFlag(t *testing.T, c *upgrade.Client) {
	t.Helper()
	raw, err := actions.Run(ctxTimeout(t), c, actions.CreateFeatureFlagParams{Name: "Crash flag", Key: "CRASH_FLAG", Context: "assign-prog"})
	if err != nil {
		t.Fatal(err)
	}
	var res actions.FlagResult
	if err := json.Unmarshal(raw, &res); err != nil || res.ID == "" {
		t.Fatalf("created flag: %s (%v)", raw, err)
	}
}

// crashFlag reads CRASH_FLAG with its lists.
func crashFlag(t *testing.T, c *upgrade.Client) *upgrade.FeatureFlag {
	t.Helper()
	all, err := c.Flags(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if f.Key == "CRASH_FLAG" {
			full, err := c.Flag(ctxTimeout(t), f.ID)
			if err != nil {
				t.Fatal(err)
			}
			return full
		}
	}
	t.Fatal("no flag CRASH_FLAG")
	return nil
}
