package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/internal/redact"
)

// SchemaVersion is the schema this binary creates and reads: 1 the tables
// of issue 22; 2 the session leases (fencing) and the chained audit trail
// stamped by the database.
const SchemaVersion = 2

// ErrSchemaNewer: the database was migrated by a newer binary; nothing is
// written to it.
var ErrSchemaNewer = errors.New("the store's schema is newer than this binary knows")

// ErrURL: the store setting is not a PostgreSQL URL pgx can read.
var ErrURL = errors.New("invalid store URL")

// migrateLock is the advisory lock key under which the schema is created.
const migrateLock int64 = 0x75706772_6d696772 // "upgrmigr"

// Password returns the password of a store URL ("" when it has none), so
// that callers can add it to the secrets they redact.
func Password(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if cfg, err := pgx.ParseConfig(raw); err == nil {
			return cfg.Password
		}
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// Redacted is the URL with its password replaced, for messages.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://[unparsable URL]"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Options tune a Store.
type Options struct {
	// Secrets are values that must never be written (as FileStore.Secrets).
	Secrets []string
	// Now stamps checkpoints; nil = time.Now.
	Now func() time.Time
	// Timeout bounds each statement; 0 = 30s.
	Timeout time.Duration
	// WriteDeadline bounds a write to UpGrade that a save of a started
	// effect announces (the effect's deadline); 0 = DefaultWriteDeadline.
	// The session's lease lasts WriteDeadline + LeaseMargin from that save
	// (docs/teams.md, "Fencing").
	WriteDeadline time.Duration
	// LeaseMargin is how long after a write's deadline it may still land
	// on UpGrade (a request already sent); 0 = DefaultLeaseMargin.
	LeaseMargin time.Duration
	// OnWait is told when Lock waits for another machine's write to land
	// or expire; nil says nothing.
	OnWait func(holder string, until time.Time)
}

// Defaults of Options.
const (
	DefaultWriteDeadline = 90 * time.Second
	DefaultLeaseMargin   = 15 * time.Second
)

// Store is one process's connection to the team store. Its methods are
// safe for concurrent use: statements go one at a time over one connection.
type Store struct {
	cfg     *pgx.ConnConfig
	secrets []string
	red     redact.Redactor
	now     func() time.Time
	timeout time.Duration
	write   time.Duration // Options.WriteDeadline
	margin  time.Duration // Options.LeaseMargin
	onWait  func(holder string, until time.Time)
	holder  string // names this process in the lease row

	mu            sync.Mutex
	conn          *pgx.Conn // nil after a lost connection: the next statement reconnects
	closed        bool
	upgradeServer atomic.Value // string: SetServer's value

	known  sync.Map // session id -> knownRow: the row this process last read or wrote
	tokens sync.Map // session id -> int64: the fencing token of a lock this process holds
	locked sync.Map // session id -> struct{}: advisory locks this process holds or is taking

	stageMu sync.Mutex
	staged  []audit.Entry // approved entries held for their session's next save
}

type knownRow struct {
	seq  int
	xmin string // the row version: any UPDATE of the row changes it
}

// Open connects to the store, creating or migrating its schema when needed.
func Open(ctx context.Context, rawURL string, o Options) (*Store, error) {
	pw := Password(rawURL)
	red := redact.New(append([]string{pw}, o.Secrets...)...)
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %s", ErrURL, Redacted(rawURL), red.String(err.Error()))
	}
	if !strings.Contains(rawURL, "default_query_exec_mode") {
		// One round trip per statement: the parameters go as text and the
		// server infers their types (what libpq's PQexecParams does). The
		// default prepares each new statement first, a second round trip
		// that a process making a few dozen statements never earns back.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	s := &Store{cfg: cfg, secrets: o.Secrets, red: red, now: o.Now, timeout: o.Timeout,
		write: o.WriteDeadline, margin: o.LeaseMargin, onWait: o.OnWait}
	if s.now == nil {
		s.now = time.Now
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	if s.write <= 0 {
		s.write = DefaultWriteDeadline
	}
	if s.margin <= 0 {
		s.margin = DefaultLeaseMargin
	}
	host, _ := os.Hostname()
	s.holder = fmt.Sprintf("%s pid %d", host, os.Getpid())
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.conn = conn
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.cfg.Copy())
	if err != nil {
		return nil, s.wrap("connect to the store", err)
	}
	return conn, nil
}

// Close ends the connection.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close(context.Background())
	s.conn = nil
	return s.wrap("close the store", err)
}

// wrap names what failed and hides the password.
func (s *Store) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return &dbError{msg: "postgres store: " + what + ": " + s.red.String(err.Error()), err: err}
}

// dbError keeps the cause for errors.Is while its text is redacted.
type dbError struct {
	msg string
	err error
}

func (e *dbError) Error() string { return e.msg }
func (e *dbError) Unwrap() error { return e.err }

// with runs fn on the connection, one caller at a time, under the timeout.
// A connection that was lost (a restarted PostgreSQL, idle_session_timeout,
// a network cut) costs a reconnect and one more try of fn, not the process:
// fn is a statement or a whole transaction, which the server rolled back
// when the connection ended before its commit. The one ambiguous case, a
// commit whose answer was lost, is for fn to recognise (Save does: the
// stored row is already the one it writes).
func (s *Store) with(fn func(ctx context.Context, c *pgx.Conn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("postgres store: closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		if s.conn == nil || s.conn.IsClosed() {
			if s.conn != nil {
				_ = s.conn.Close(context.Background())
				s.conn = nil
			}
			conn, err := s.reconnect(ctx)
			if err != nil {
				return err
			}
			s.conn = conn
		}
		err := fn(ctx, s.conn)
		if err == nil || attempt > 0 || !connectionLost(err, s.conn) {
			return err
		}
		_ = s.conn.Close(context.Background())
		s.conn = nil
	}
}

// reconnect connects again, retrying while the server restarts (refused
// connections, "the database system is starting up") until ctx ends.
func (s *Store) reconnect(ctx context.Context) (*pgx.Conn, error) {
	wait := 50 * time.Millisecond
	for {
		conn, err := pgx.ConnectConfig(ctx, s.cfg.Copy())
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil || !transient(err) {
			return nil, s.wrap("reconnect to the store", err)
		}
		select {
		case <-ctx.Done():
			return nil, s.wrap("reconnect to the store", err)
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

// connectionLost reports whether err ended the connection (or is the
// server going away), so that the statement may be tried again on a new one.
func connectionLost(err error, c *pgx.Conn) bool {
	if c != nil && c.IsClosed() {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// admin_shutdown, crash_shutdown, cannot_connect_now, idle session
		// timeout, and the connection exceptions of class 08.
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "57P05" || strings.HasPrefix(pe.Code, "08")
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// transient reports whether a failed connect may succeed in a moment.
func transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P03"
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// readData scans the one column of the one row query selects: a data
// column; pgx.ErrNoRows when there is no row.
func (s *Store) readData(query string, args ...any) ([]byte, error) {
	var data []byte
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, query, args...).Scan(&data)
	})
	return data, err
}

// tx runs fn in a transaction.
func (s *Store) tx(fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.with(func(ctx context.Context, c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

const schemaV1 = `
CREATE TABLE upgrade_agent_sessions (
	id text PRIMARY KEY,
	seq bigint NOT NULL,
	status text NOT NULL,
	updated_at timestamptz NOT NULL,
	data bytea NOT NULL
);
CREATE TABLE upgrade_agent_history (
	session_id text NOT NULL,
	seq bigint NOT NULL,
	data bytea NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE upgrade_agent_jobs (
	id text PRIMARY KEY,
	created_at timestamptz NOT NULL DEFAULT now(),
	data bytea NOT NULL
);
-- Checkpoints are read far more often than written, and pglz buys little
-- on them: kept out of line, uncompressed, a load costs no decompression.
ALTER TABLE upgrade_agent_sessions ALTER COLUMN data SET STORAGE EXTERNAL;
ALTER TABLE upgrade_agent_history ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE TABLE upgrade_agent_audit (
	n bigserial PRIMARY KEY,
	at timestamptz NOT NULL,
	db_user text NOT NULL DEFAULT session_user,
	entry jsonb NOT NULL
);
CREATE INDEX upgrade_agent_audit_session ON upgrade_agent_audit ((entry->>'session_id'));
CREATE FUNCTION upgrade_agent_audit_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.db_user := session_user;
	RETURN NEW;
END $$;
CREATE TRIGGER upgrade_agent_audit_stamp BEFORE INSERT ON upgrade_agent_audit
	FOR EACH ROW EXECUTE FUNCTION upgrade_agent_audit_stamp();
`

// schemaVersion reads the version, 0 when the store has no schema yet.
func schemaVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var exists bool
	// A scan of pg_class, not to_regclass: the catalog cache may not yet
	// know a table another session made while this one waited for the
	// advisory lock.
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = 'upgrade_agent_schema' AND n.nspname = current_schema())`).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v *int
	if err := q.QueryRow(ctx, `SELECT max(version) FROM upgrade_agent_schema`).Scan(&v); err != nil {
		return 0, err
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// currentVersion is migrate's first look, outside any transaction: one
// statement, the one a store at the current schema costs every command (a
// new server process's first query, about 2 ms less than schemaVersion's
// two on the two-core machine). A missing table (undefined_table) reads as
// no schema; the migration reads again, carefully, under its lock.
func currentVersion(ctx context.Context, c *pgx.Conn) (int, error) {
	var v *int
	err := c.QueryRow(ctx, `SELECT max(version) FROM upgrade_agent_schema`).Scan(&v)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
		return 0, nil
	}
	if err != nil || v == nil {
		return 0, err
	}
	return *v, nil
}

// migrate brings the schema to SchemaVersion. The common case, a current
// schema, costs one read and writes nothing (a least-privilege role gets
// here); creation and upgrades run under an advisory lock so two machines
// starting at once do not both make them.
func (s *Store) migrate(ctx context.Context) error {
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		v, err := currentVersion(ctx, c)
		if err != nil {
			return s.wrap("read the schema version", err)
		}
		if v > SchemaVersion {
			return fmt.Errorf("%w: the database is at schema version %d, this binary knows version %d; nothing was written (upgrade upgrade-agent)", ErrSchemaNewer, v, SchemaVersion)
		}
		if v == SchemaVersion {
			return nil
		}
		return s.wrap(fmt.Sprintf("migrate the schema from version %d to %d (run any command once with the owner's URL)", v, SchemaVersion), pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
				return err
			}
			v, err := schemaVersion(ctx, tx)
			if err != nil || v >= SchemaVersion {
				return err // another machine made it meanwhile
			}
			if v == 0 {
				if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS upgrade_agent_schema (version integer NOT NULL)`); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, schemaV1); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, schemaV2); err != nil {
				return err
			}
			if v == 0 {
				_, err = tx.Exec(ctx, `INSERT INTO upgrade_agent_schema (version) VALUES ($1)`, SchemaVersion)
			} else {
				_, err = tx.Exec(ctx, `UPDATE upgrade_agent_schema SET version = $1`, SchemaVersion)
			}
			return err
		}))
	})
	return err
}

// lockKey is the advisory lock key of a session: 64 bits of a hash of its
// id, so two ids share a key with negligible odds.
func lockKey(kind, id string) int64 {
	h := sha256.Sum256([]byte("upgrade-agent " + kind + " " + id))
	return int64(binary.BigEndian.Uint64(h[:8]))
}
