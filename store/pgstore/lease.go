package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
)

// Lock takes the session: its advisory lock, on the store's connection,
// without waiting (ErrLocked at once when another process holds it, or
// when this process already does: a session-level advisory lock is
// re-entrant within one connection, so the process keeps its own list),
// and then its fencing token, a number in upgrade_agent_locks that every
// taker raises. The advisory lock dies with the connection (a killed
// process, a restarted server, idle_session_timeout), and a reconnect does
// not take it again; the token is what a save checks, so a holder whose
// connection dropped learns it lost the session at its next save, before
// any write (docs/teams.md, "Fencing").
//
// When the session's lease is live (a write announced by an earlier holder
// may still land on UpGrade), Lock waits, holding the advisory lock, until
// the lease ends: only then may this process reconcile that write.
func (s *Store) Lock(id string) (func(), error) {
	if !checkpoint.ValidID(id) {
		return nil, fmt.Errorf("lock session: invalid session id %q", id)
	}
	if _, mine := s.locked.LoadOrStore(id, struct{}{}); mine {
		return nil, checkpoint.Locked(id)
	}
	key := lockKey("session", id)
	var ok bool
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok)
	})
	if err != nil || !ok {
		s.locked.Delete(id)
		if err != nil {
			return nil, s.wrap("lock session "+id, err)
		}
		return nil, checkpoint.Locked(id)
	}
	release := func() {
		s.unlockAdvisory(key)
		s.locked.Delete(id)
	}
	token, err := s.takeToken(id)
	if err != nil {
		release()
		return nil, err
	}
	s.tokens.Store(id, token)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.tokens.CompareAndDelete(id, token)
			release()
		})
	}, nil
}

// unlockAdvisory releases a session's advisory lock on the current
// connection. The server releases it before it answers, so the next holder
// (this machine's next command, say) finds it free at once; a connection
// that ended took the lock with it, and none is made just to unlock.
func (s *Store) unlockAdvisory(key int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.conn == nil || s.conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	_, _ = s.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
}

// takeToken raises the session's fencing token once no lease is live: one
// statement (an upsert that raises the token only when no lease is live,
// by the database's clock), and a read of the lease's holder and end when
// one is.
func (s *Store) takeToken(id string) (int64, error) {
	told := false
	for {
		var token int64
		err := s.with(func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, `INSERT INTO upgrade_agent_locks AS l (session_id, token, holder) VALUES ($1, 1, $2)
				ON CONFLICT (session_id) DO UPDATE SET token = l.token + 1, holder = EXCLUDED.holder, lease_until = NULL
				WHERE l.lease_until IS NULL OR l.lease_until <= now()
				RETURNING token`, id, s.holder).Scan(&token)
		})
		if err == nil {
			return token, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, s.wrap("lock session "+id, err)
		}
		// A live lease: who holds it, and until when.
		var live bool
		var left float64
		var holder string
		err = s.with(func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, `SELECT holder, coalesce(lease_until > now(), false),
				coalesce(extract(epoch FROM lease_until - now()), 0)::float8
				FROM upgrade_agent_locks WHERE session_id = $1`, id).Scan(&holder, &live, &left)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // the row went meanwhile (the session was removed)
		}
		if err != nil {
			return 0, s.wrap("lock session "+id, err)
		}
		if !live {
			continue // it ended meanwhile
		}
		wait := time.Duration(left * float64(time.Second))
		if !told && s.onWait != nil {
			s.onWait(holder, time.Now().Add(wait))
			told = true
		}
		// Checked again at least each second: the holder may end its lease
		// early (its write returned).
		time.Sleep(min(wait+10*time.Millisecond, time.Second))
	}
}

// ErrLockLost: this process held the session, but another took it since
// (its lock connection dropped); nothing was written. It wraps
// checkpoint.ErrLocked. (A type of its own rather than fmt.Errorf, which
// would be a call at package init.)
var ErrLockLost error = &lockLostError{}

type lockLostError struct{}

func (*lockLostError) Error() string {
	return checkpoint.ErrLocked.Error() + ": the session lock was lost"
}
func (*lockLostError) Unwrap() error { return checkpoint.ErrLocked }

// fence is the save's check of the session's token, in the save's own
// transaction, and the lease of a write the save announces: until the
// write's deadline plus the margin in which a request already sent may
// still land, by the database's clock. A save with no started effect ends
// the lease.
func (s *Store) fence(ctx context.Context, tx pgx.Tx, id string, announced, started bool) error {
	v, held := s.tokens.Load(id)
	if !held {
		return nil // not locked by this process: library use, import
	}
	var token int64
	var leased bool
	err := tx.QueryRow(ctx, `SELECT token, lease_until IS NOT NULL FROM upgrade_agent_locks WHERE session_id = $1 FOR UPDATE`, id).Scan(&token, &leased)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s.wrap("save session "+id, err)
	}
	if err != nil || token != v.(int64) {
		return fmt.Errorf("save checkpoint of session %s: %w (another process took the session after this one's connection to the store dropped); nothing was written and nothing was run", id, ErrLockLost)
	}
	switch {
	case announced:
		_, err = tx.Exec(ctx, `UPDATE upgrade_agent_locks SET lease_until = now() + make_interval(secs => $2) WHERE session_id = $1`,
			id, (s.write + s.margin).Seconds())
	case !started && leased: // most saves have no lease to end: no statement, no row version
		_, err = tx.Exec(ctx, `UPDATE upgrade_agent_locks SET lease_until = NULL WHERE session_id = $1`, id)
	}
	return s.wrap("save session "+id, err)
}

// AnnounceWrite leases the session for a write that no save announced (a
// repeat after reconciliation), if this process still holds its token, and
// returns the write's deadline. ErrLockLost when it does not.
func (s *Store) AnnounceWrite(id string) (time.Time, error) {
	v, held := s.tokens.Load(id)
	deadline := time.Now().Add(s.write)
	if !held {
		return deadline, nil
	}
	var n int64
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE upgrade_agent_locks SET lease_until = now() + make_interval(secs => $3)
			WHERE session_id = $1 AND token = $2`, id, v.(int64), (s.write + s.margin).Seconds())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return time.Time{}, s.wrap("lease session "+id, err)
	}
	if n == 0 {
		return time.Time{}, fmt.Errorf("write of session %s: %w (another process took the session after this one's connection to the store dropped); nothing was run", id, ErrLockLost)
	}
	return deadline, nil
}

// WriteReturned ends the lease of the session's write once the call to
// UpGrade has returned: at once when it succeeded (it landed), after the
// margin when it failed (a request already sent may still land). Only the
// holder of the token can end it.
func (s *Store) WriteReturned(id string, failed bool) error {
	v, held := s.tokens.Load(id)
	if !held {
		return nil
	}
	margin := time.Duration(0)
	if failed {
		margin = s.margin
	}
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `UPDATE upgrade_agent_locks SET lease_until = least(lease_until, now() + make_interval(secs => $3))
			WHERE session_id = $1 AND token = $2`, id, v.(int64), margin.Seconds())
		return err
	})
	return s.wrap("end the lease of session "+id, err)
}
