//go:build unix

package cmd

import (
	"net/http"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The undo's write under TestCrashConfirmedWrites: CRASH_FLAG turned on
// (with --yes), then the undo of that change, killed at every kill point
// and resumed until done, must reach UpGrade once, leave the flag off and
// be recorded once (two changes in all).

const enableCrashFlag = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: turn CRASH_FLAG on, reasoning: action}
- call:
    set_action_needed: {action: update_feature_flag_status, reasoning: asked}
    set_action_params: {action_params: {flag_id: CRASH_FLAG, status: enabled}}
- reply: Turned CRASH_FLAG on.
`

const proposeUndo = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: undo that, reasoning: action}
- call:
    set_action_needed: {action: undo_change, reasoning: asked}
    set_action_params: {action_params: {change_id: last}}
- reply: About to undo it.
`

func init() {
	crashWrites = append(crashWrites,
		crashWrite{name: "undo", propose: proposeUndo, before: enableCrashFlag, changes: 2,
			method: http.MethodPatch, path: "/flags/status", setup: mkFlag, check: func(*testing.T, *sim.Sim) {},
			checkAPI: func(t *testing.T, c *upgrade.Client) {
				if f := crashFlag(t, c); f.Status != upgrade.FlagDisabled {
					t.Errorf("CRASH_FLAG is %s, want disabled again", f.Status)
				}
			}},
	)
}
