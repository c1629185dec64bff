// Package actions holds everything about the executor actions of the agent
// (spec/pipeline.md) that is plain Go, and the registry that is the one
// list of them: each action declares itself in one file with Add(r, Def[P])
// in that file's declare function (name, order, schema, references,
// validation, plan, execution or job body, report), and everything else
// reads the registry. The package does no work at init: the built-in set
// is declared from builtin_list.go on first use. Per action: their typed params, lenient
// but exact binding, validation against UpGrade's rules, the deterministic
// confirmation text, execution, reconciliation after a crash, and the
// condition-balance computation that the job runner drives.
//
// Every action, built in or behind the pipeline's MCP adapter, is an
// Action; one that may answer with a job is also a JobAction. The pipeline
// uses them in this order:
//
//	a, ok := reg.Lookup(name)
//	b, err := a.Bind(raw)                    // typed params, canonical JSON, hash; *ParseError per field
//	problems, err := a.Validate(ctx, env, b) // UpGrade's rules: []Problem
//	plan, err := a.Plan(ctx, env, b)         // the confirmation text, deterministic
//	... the person says yes to b.Hash (possibly in another process) ...
//	out, err := a.Execute(ctx, env, b, key)  // key: the approved confirmation's id
//
// Params that canonicalise alike bind to the same hash, so an approval
// never depends on how a model spelled them. After a crash between
// "started" and "done" of an effect, Reconcile says whether the write
// happened (done), did not (not_done), cannot be told (unknown), or may be
// run again with the same key (repeat). Spec says what an action declares:
// destructive, long-running, which cached data it invalidates.
// A long-running action's job body (Job: Total, Run in batches with its
// tally as JSON) is what job runners drive; RunBalance and SummarizeBalance
// are the body of test_condition_balance. SchemaFor is the project's one
// schema generator.
//
// UpGrade is reached through the API interface (a subset of
// *upgrade.Client). The package must not talk HTTP itself, call the LLM,
// read or write checkpoints or job records, print, or decide about
// confirmations: it only says whether one is needed and what it says.
// Execute trusts its caller to have validated and confirmed the params.
package actions
