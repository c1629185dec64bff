// Package audit is the append-only audit trail of every decision the agent
// records (docs/teams.md): a confirmation proposed, approved, denied or
// expired, a write executed with its outcome and what the server answered,
// a job started, finished or cancelled.
//
// What it is for:
//   - the entry (type Entry) and its events;
//   - the trail of the file store (FileLog: a JSONL file in the state dir,
//     appended with O_APPEND and fsync); the PostgreSQL store keeps its own
//     in a table (store/pgstore) behind the same interface (Log).
//
// What it must not do:
//   - change or remove an entry once written;
//   - hold a secret: Answer keeps only the identifying fields of a server
//     answer (Summarize), never a whole body.
package audit
