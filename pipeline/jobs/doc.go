// Package jobs runs long executor actions (any registered action with a
// job body, such as test_condition_balance) outside the turn that started them, as spec/durability.md asks: a detached worker
// process per job, a job record on disk that the worker, `resume` and
// `jobs list|show|cancel` share, and crash recovery from the last committed
// batch.
//
// The pieces:
//
//   - Store keeps one JSON record per job in <state-dir>/jobs/<id>.json,
//     written atomically (temp file, fsync, rename, fsync of the folder)
//     and changed only under a per-job file lock, so the worker's
//     heartbeats, its commits and a concurrent `jobs cancel` never lose each
//     other's updates.
//   - Runner implements actions.JobRunner: Start writes the record and
//     launches a worker; Wait polls the record and restarts a worker whose
//     heartbeat went stale or whose process is gone; Cancel marks the job
//     cancelled and signals the worker.
//   - Worker is the body of `upgrade-agent jobs work ID`: it claims the
//     record, heartbeats, runs the action's job body (actions.Job) from the
//     committed tally and commits after every batch, then records the
//     result or the error.
//
// A worker claims a record with a fresh token; only the holder of the
// current token may commit. A worker that was presumed dead but was only
// slow therefore stops at its next commit or heartbeat instead of counting
// users a second time.
//
// What it must not do: name a concrete action (it knows actions.Job only),
// import the pipeline package (the worker does not link the agent), talk
// to the LLM, read or write session checkpoints (the pipeline records a
// job's outcome in the session), print to stdout, or ever put a secret in
// a record or on a worker's command line (the UpGrade token reaches a
// worker only through its environment).
package jobs
