package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/upgrade-agent/upgrade-agent/audit"
)

// Audit is the store's audit trail (audit.Log): an append-only table whose
// n, at, db_user, prev and hash the database fills in (schemaV2's trigger).
type Audit struct{ s *Store }

var (
	_ audit.Log   = (*Audit)(nil)
	_ audit.Ahead = (*Audit)(nil)
)

// Audit returns the store's audit trail.
func (s *Store) Audit() *Audit { return &Audit{s: s} }

// Append inserts an entry, escaped; the time, db_user and chain are set by
// the database, not from the entry.
func (a *Audit) Append(e audit.Entry) error {
	err := a.s.with(func(ctx context.Context, c *pgx.Conn) error {
		return insertAudit(ctx, c, e)
	})
	return a.s.wrap("append to the audit trail", err)
}

// execer is a connection or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func insertAudit(ctx context.Context, q execer, e audit.Entry) error {
	e = e.Escaped()
	e.Time, e.DBUser, e.N, e.Prev, e.Hash = time.Time{}, "", 0, "", ""
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	// at is the database's clock (the trigger overwrites whatever is sent).
	_, err = q.Exec(ctx, `INSERT INTO upgrade_agent_audit (at, entry) VALUES (now(), $1::jsonb)`, string(body))
	return err
}

// Stage holds an entry until the next save of its session, which stores
// it in the same transaction as the checkpoint (Store.Save).
func (a *Audit) Stage(e audit.Entry) {
	a.s.stageMu.Lock()
	defer a.s.stageMu.Unlock()
	a.s.staged = append(a.s.staged, e)
}

// Flush appends what is still staged.
func (a *Audit) Flush() error {
	a.s.stageMu.Lock()
	rest := a.s.staged
	a.s.staged = nil
	a.s.stageMu.Unlock()
	for i, e := range rest {
		if err := a.Append(e); err != nil {
			a.s.stageMu.Lock()
			a.s.staged = append(rest[i:], a.s.staged...)
			a.s.stageMu.Unlock()
			return err
		}
	}
	return nil
}

// takeStaged removes and returns the entries staged for session id.
func (s *Store) takeStaged(id string) []audit.Entry {
	s.stageMu.Lock()
	defer s.stageMu.Unlock()
	var mine, rest []audit.Entry
	for _, e := range s.staged {
		if e.SessionID == id {
			mine = append(mine, e)
		} else {
			rest = append(rest, e)
		}
	}
	s.staged = rest
	return mine
}

// restage puts entries back (their save failed).
func (s *Store) restage(entries []audit.Entry) {
	if len(entries) == 0 {
		return
	}
	s.stageMu.Lock()
	defer s.stageMu.Unlock()
	s.staged = append(entries, s.staged...)
}

// Read returns the matching entries, oldest first (in the order written).
func (a *Audit) Read(f audit.Filter) ([]audit.Entry, error) {
	var out []audit.Entry
	err := a.s.with(func(ctx context.Context, c *pgx.Conn) error {
		out = nil
		rs, err := c.Query(ctx, `SELECT n, at, db_user, entry FROM upgrade_agent_audit
			WHERE ($1 = '' OR entry->>'session_id' = $1) AND ($2 = '' OR entry->>'actor' = $2) AND ($3::timestamptz IS NULL OR at >= $3)
			ORDER BY n`, f.SessionID, f.Actor, sinceArg(f))
		if err != nil {
			return err
		}
		for rs.Next() {
			var e audit.Entry
			var n int64
			var at time.Time
			var user string
			if err := rs.Scan(&n, &at, &user, &e); err != nil {
				return err
			}
			e.N, e.Time, e.DBUser = n, at.UTC(), user
			out = append(out, e)
		}
		return rs.Err()
	})
	return out, a.s.wrap("read the audit trail", err)
}

func sinceArg(f audit.Filter) any {
	if f.Since.IsZero() {
		return nil
	}
	return f.Since
}

// Verify walks the chain in the order of n: each row's hash is recomputed
// from its columns and must be what the row holds, and each row must name
// the hash of the row before it. Gaps in n alone are no break (a rolled
// back insert uses up a number); a removed row shows as the next row
// naming a hash that is not its predecessor's.
func (a *Audit) Verify() (audit.Report, error) {
	var r audit.Report
	err := a.s.with(func(ctx context.Context, c *pgx.Conn) error {
		r = audit.Report{}
		rs, err := c.Query(ctx, `SELECT n, (extract(epoch FROM at) * 1000000)::bigint, db_user, entry::text, prev, hash
			FROM upgrade_agent_audit ORDER BY n`)
		if err != nil {
			return err
		}
		defer rs.Close()
		last, lastAt := "", int64(0)
		for rs.Next() {
			var n, at int64
			var user, entry, prev, hash string
			if err := rs.Scan(&n, &at, &user, &entry, &prev, &hash); err != nil {
				return err
			}
			if r.Problem != nil {
				continue
			}
			where := fmt.Sprintf("postgres %s upgrade_agent_audit n=%d", a.s.cfg.Database, n)
			sum := sha256.Sum256([]byte(prev + "|" + strconv.FormatInt(n, 10) + "|" + strconv.FormatInt(at, 10) + "|" + user + "|" + entry))
			switch {
			case hash != hex.EncodeToString(sum[:]):
				r.Problem = &audit.Problem{Where: where, N: n, Kind: audit.BreakChanged, Reason: "the row does not match its hash (changed after it was written)"}
			case prev != last && r.Entries == 0:
				r.Problem = &audit.Problem{Where: where, N: n, Kind: audit.BreakRemoved, Reason: "the first row names an earlier entry that is gone"}
			case prev != last:
				r.Problem = &audit.Problem{Where: where, N: n, Kind: audit.BreakRemoved,
					Reason: "the row does not name the row before it: a row in between was removed, or this one was put out of order"}
			case at < lastAt:
				r.Problem = &audit.Problem{Where: where, N: n, Kind: audit.BreakOutOfOrder,
					Reason: "the row is dated before the row it follows (backdated)"}
			default:
				r.Entries++
				r.Head, last, lastAt = hash, hash, at
			}
		}
		return rs.Err()
	})
	return r, a.s.wrap("verify the audit trail", err)
}
