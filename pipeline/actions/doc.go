// Package actions holds everything about the nine executor actions of the
// agent (spec/pipeline.md) that is plain Go: their typed params, strict
// parsing, validation against UpGrade's rules, the deterministic
// confirmation text, execution, reconciliation after a crash, and the
// condition-balance computation that the job runner drives.
//
// The pipeline uses it in this order:
//
//	p, err := actions.Parse(name, raw)        // shape errors: *ParseError, per field
//	problems, err := actions.Validate(ctx, api, p)  // UpGrade's rules: []Problem
//	plan, err := actions.BuildPlan(ctx, api, p)     // the confirmation; plan.Params is Canonical(p)
//	... the person says yes (possibly in another process) ...
//	p, _ = actions.Parse(plan.Action, plan.Params)
//	stale, err := actions.IsStale(ctx, api, plan)   // refuse and re-ask when true
//	result, err := actions.Execute(ctx, api, p)
//
// After a crash between "started" and "done" of an effect, Reconcile says
// whether the write happened (done), did not (not_done) or cannot be told
// (unknown). RequiresConfirmation applies the --confirm policy; Lookup gives
// each action's Spec (destructive, long-running, what caches it
// invalidates, the params type for schema generation). RunBalance and
// SummarizeBalance are the resumable body of test_condition_balance.
//
// UpGrade is reached through the API interface (a subset of
// *upgrade.Client). The package must not talk HTTP itself, call the LLM,
// read or write checkpoints or job records, print, or decide about
// confirmations: it only answers whether one is needed and what it says.
// Execute trusts its caller to have validated and confirmed the params.
package actions
