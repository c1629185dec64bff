// Package checkpoint stores the durable state of agent sessions: one checkpoint per
// session on disk, written atomically at every node boundary and interrupt, with a
// short history, a per-session lock, integrity checks and format migrations.
//
// What it is for:
//   - the on-disk format (type Checkpoint, FormatVersion, the checksum rule);
//   - the file store under <state-dir>/sessions (FileStore): Load, Save, Lock, List,
//     Latest, Remove, Import, Export;
//   - SessionStore, the interface the file store and the PostgreSQL store
//     (store/pgstore) both implement, with the helpers another store needs to write
//     the very same JSON (NextOf, Encode, Decode, CheckSecrets); checkpoint/storetest
//     is the conformance suite both run;
//   - the effect log that makes executor actions exactly-once (Effect, StartEffect,
//     FinishEffect, ParamsHash), compacted at every save so that it stays small.
//
// What it must not do:
//   - import the pipeline, llm or upgrade packages: the pipeline imports this package,
//     and the session state is opaque JSON here (Checkpoint.State);
//   - hold secrets: Save refuses to write bytes that contain a configured secret;
//   - repair, rewrite or move a file that fails its integrity checks: a corrupt
//     checkpoint is reported (ErrCorrupt, naming the file) and left byte-identical so a
//     person can inspect it;
//   - wait for a lock: a session in use by another process is ErrLocked at once;
//   - open anything but a regular file, or read more than 16 MiB: a named pipe, a
//     device or an oversized file is refused (ErrCorrupt) before it is opened;
//   - replace a stored session on Import: other content under the same id is ErrExists.
//
// The layout on disk and the exact checksum rule are described in docs/checkpoints.md.
package checkpoint
