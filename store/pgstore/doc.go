// Package pgstore is the shared PostgreSQL store of a team (docs/teams.md):
// sessions with their history, the session lock, job records and the audit
// trail, in one database every machine names with --store. It speaks to
// PostgreSQL through jackc/pgx v5, with plain SQL.
//
// What it is for:
//   - checkpoint.SessionStore over tables (the checkpoint's bytes are the
//     very JSON the file store writes, checksum included);
//   - the session lock as a session-level advisory lock held on a
//     connection of its own, so it dies with the process that holds it;
//   - job records (jobs.RecordBackend) and the audit trail (audit.Log);
//   - creating and migrating its schema under an advisory lock, and
//     refusing a schema newer than it knows without writing anything.
//
// What it must not do:
//   - let the URL's password reach an error, a log or a file: every error
//     leaving the package has it redacted;
//   - update or delete an audit entry: the trail is append-only, and a
//     least-privilege role has only SELECT and INSERT on it.
package pgstore
