package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
)

var _ checkpoint.SessionStore = (*Store)(nil)

// maxData is the largest checkpoint the store writes, as for files.
const maxData = 16 << 20

// SetServer names the UpGrade this process works against: Save records it
// as upgrade_server in a checkpoint that names none yet, as FileStore does.
func (s *Store) SetServer(server string) { s.upgradeServer.Store(server) }

func (s *Store) server() string {
	v, _ := s.upgradeServer.Load().(string)
	return v
}

// Where names the row of a session, for messages.
func (s *Store) Where(id string) string {
	return "postgres " + s.cfg.Database + " upgrade_agent_sessions id=" + id
}

func (s *Store) whereHistory(id string, seq int) string {
	return fmt.Sprintf("postgres %s upgrade_agent_history session_id=%s seq=%d", s.cfg.Database, id, seq)
}

// Load reads and verifies the session's latest checkpoint. A row that fails
// a check is *checkpoint.CorruptError naming it, and is left untouched.
func (s *Store) Load(id string) (*checkpoint.Checkpoint, error) {
	if !checkpoint.ValidID(id) {
		return nil, checkpoint.NotFound(id)
	}
	var data []byte
	var xmin string
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT data, xmin::text FROM upgrade_agent_sessions WHERE id = $1`, id).Scan(&data, &xmin)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, checkpoint.NotFound(id)
	}
	if err != nil {
		return nil, s.wrap("load session "+id, err)
	}
	cp, _, err := checkpoint.Decode(s.Where(id), data, id)
	if err != nil {
		return nil, err
	}
	s.known.Store(id, knownRow{seq: cp.Seq, xmin: xmin})
	return cp, nil
}

// Save writes cp as the session's new latest checkpoint, with FileStore's
// rules: seq conflicts (ErrConflict), a corrupt current row is never
// replaced (ErrCorrupt), secrets are refused (ErrSecret). The replaced
// checkpoint goes to the history, which keeps checkpoint.HistoryLimit.
//
// A session this process has locked is fenced: the save checks, in its
// own transaction, that the lock's token is still this process's
// (ErrLockLost otherwise: another machine took the session, nothing is
// written). A save that announces a write (a started effect without a
// deadline) gives that effect its deadline and the session a lease until
// the write can no longer land; the audit entries staged for the session
// (the approval of that write) are stored in the same transaction.
func (s *Store) Save(cp *checkpoint.Checkpoint) error {
	next, err := checkpoint.NextOf(cp, s.now(), s.server())
	if err != nil {
		return err
	}
	id := next.SessionID
	announced := stampDeadlines(next, time.Now().Add(s.write))
	data, sum, err := checkpoint.Encode(next)
	if err != nil {
		return fmt.Errorf("save checkpoint of session %s: encode: %w", id, err)
	}
	if err := checkpoint.CheckSecrets(data, s.secrets); err != nil {
		return fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	if len(data) > maxData {
		return fmt.Errorf("save checkpoint of session %s: %d bytes, larger than a checkpoint may be (%d); nothing was written", id, len(data), maxData)
	}
	staged := s.takeStaged(id)
	expect := cp.Seq
	var xmin string
	err = s.tx(func(ctx context.Context, tx pgx.Tx) error {
		var diskSeq int
		var diskXmin string
		err := tx.QueryRow(ctx, `SELECT seq, xmin::text FROM upgrade_agent_sessions WHERE id = $1 FOR UPDATE`, id).Scan(&diskSeq, &diskXmin)
		exists := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return s.wrap("save session "+id, err)
		}
		if exists && diskSeq == next.Seq {
			// A retry after a commit whose answer was lost: the row is
			// already this very checkpoint.
			var disk []byte
			if err := tx.QueryRow(ctx, `SELECT data FROM upgrade_agent_sessions WHERE id = $1`, id).Scan(&disk); err == nil && checkpoint.ChecksumOf(disk) == sum {
				return tx.QueryRow(ctx, `SELECT xmin::text FROM upgrade_agent_sessions WHERE id = $1`, id).Scan(&xmin)
			}
		}
		if exists {
			if err := s.verifyRow(ctx, tx, id, diskSeq, diskXmin); err != nil {
				return err
			}
		}
		switch {
		case !exists && expect != 0:
			return fmt.Errorf("%w: session %s has no checkpoint in the store, but this one follows seq %d", checkpoint.ErrConflict, id, expect)
		case exists && diskSeq != expect:
			return fmt.Errorf("%w: session %s is at seq %d in the store, but this checkpoint follows seq %d (written by someone else meanwhile?)", checkpoint.ErrConflict, id, diskSeq, expect)
		}
		if err := s.fence(ctx, tx, id, announced, len(next.PendingEffects()) > 0); err != nil {
			return err
		}
		for _, e := range staged {
			if err := insertAudit(ctx, tx, e); err != nil {
				return s.wrap("save session "+id+": store its audit entry ("+e.Event+") first", err)
			}
		}
		b := &pgx.Batch{}
		if exists {
			b.Queue(`INSERT INTO upgrade_agent_history (session_id, seq, data) SELECT id, seq, data FROM upgrade_agent_sessions WHERE id = $1
				ON CONFLICT (session_id, seq) DO UPDATE SET data = EXCLUDED.data`, id)
			b.Queue(`DELETE FROM upgrade_agent_history WHERE session_id = $1 AND seq <= $2`, id, next.Seq-1-checkpoint.HistoryLimit)
			b.Queue(`UPDATE upgrade_agent_sessions SET seq = $2, status = $3, updated_at = $4, data = $5 WHERE id = $1 RETURNING xmin::text`,
				id, next.Seq, string(next.Status), next.UpdatedAt, data).QueryRow(func(r pgx.Row) error { return r.Scan(&xmin) })
		} else {
			b.Queue(`INSERT INTO upgrade_agent_sessions (id, seq, status, updated_at, data) VALUES ($1, $2, $3, $4, $5) RETURNING xmin::text`,
				id, next.Seq, string(next.Status), next.UpdatedAt, data).QueryRow(func(r pgx.Row) error { return r.Scan(&xmin) })
		}
		return s.wrap("save session "+id, tx.SendBatch(ctx, b).Close())
	})
	if err != nil {
		s.restage(staged)
		return err
	}
	s.known.Store(id, knownRow{seq: next.Seq, xmin: xmin})
	next.Checksum = sum
	*cp = *next
	return nil
}

// stampDeadlines gives each started effect that has none the deadline of
// its write; true when there was one (the save announces a write).
func stampDeadlines(cp *checkpoint.Checkpoint, deadline time.Time) bool {
	announced := false
	deadline = deadline.UTC()
	cp.Effects = slices.Clone(cp.Effects) // the caller's checkpoint keeps its own until the save succeeds
	for i := range cp.Effects {
		e := &cp.Effects[i]
		if e.State == checkpoint.EffectStarted && e.Deadline == nil {
			d := deadline
			e.Deadline = &d
			announced = true
		}
	}
	return announced
}

// verifyRow makes sure the current row is sound before it is replaced: the
// row version this process last read or wrote (same xmin: no one has
// updated it since) is known to be; any other is read and decoded.
func (s *Store) verifyRow(ctx context.Context, tx pgx.Tx, id string, seq int, xmin string) error {
	if k, ok := s.known.Load(id); ok && k.(knownRow).seq == seq && k.(knownRow).xmin == xmin {
		return nil
	}
	var data []byte
	if err := tx.QueryRow(ctx, `SELECT data FROM upgrade_agent_sessions WHERE id = $1`, id).Scan(&data); err != nil {
		return s.wrap("save session "+id, err)
	}
	cp, _, err := checkpoint.Decode(s.Where(id), data, id)
	if err != nil {
		return fmt.Errorf("save checkpoint of session %s: refusing to replace it: %w", id, err)
	}
	if cp.Seq != seq {
		return &checkpoint.CorruptError{Path: s.Where(id), Reason: fmt.Sprintf("seq column %d does not match the checkpoint's seq %d", seq, cp.Seq)}
	}
	return nil
}

// List summarises every session, most recently updated first; a row that
// fails its checks is listed as corrupt.
func (s *Store) List() ([]checkpoint.Summary, error) {
	return s.list(nil)
}

func (s *Store) list(statuses []checkpoint.Status) ([]checkpoint.Summary, error) {
	type row struct {
		id   string
		data []byte
		at   time.Time
	}
	var rows []row
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		q := `SELECT id, data, updated_at FROM upgrade_agent_sessions ORDER BY updated_at DESC, id`
		args := []any{}
		if len(statuses) > 0 {
			st := make([]string, len(statuses))
			for i, x := range statuses {
				st[i] = string(x)
			}
			q = `SELECT id, data, updated_at FROM upgrade_agent_sessions WHERE status = ANY($1) ORDER BY updated_at DESC, id`
			args = append(args, st)
		}
		rs, err := c.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.id, &r.data, &r.at); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return rs.Err()
	})
	if err != nil {
		return nil, s.wrap("list sessions", err)
	}
	out := make([]checkpoint.Summary, 0, len(rows))
	for _, r := range rows {
		cp, _, err := checkpoint.Decode(s.Where(r.id), r.data, r.id)
		if err != nil {
			out = append(out, checkpoint.Summary{ID: r.id, Status: checkpoint.StatusCorrupt, Error: err.Error(), UpdatedAt: r.at.UTC()})
			continue
		}
		out = append(out, checkpoint.SummaryOf(cp))
	}
	return out, nil
}

// Latest returns the most recently updated session with one of statuses.
func (s *Store) Latest(statuses ...checkpoint.Status) (string, error) {
	list, err := s.list(statuses)
	if err != nil {
		return "", err
	}
	for _, sum := range list {
		if sum.Status != checkpoint.StatusCorrupt && (len(statuses) == 0 || slices.Contains(statuses, sum.Status)) {
			return sum.ID, nil
		}
	}
	return "", checkpoint.NoneLatest(statuses...)
}

// Remove deletes the session and its history; a locked one is refused.
func (s *Store) Remove(id string) error {
	if !checkpoint.ValidID(id) {
		return checkpoint.NotFound(id)
	}
	unlock, err := s.Lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	var n int64
	err = s.tx(func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM upgrade_agent_sessions WHERE id = $1`, id)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		if _, err = tx.Exec(ctx, `DELETE FROM upgrade_agent_history WHERE session_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM upgrade_agent_locks WHERE session_id = $1`, id)
		return err
	})
	if err != nil {
		return s.wrap("remove session "+id, err)
	}
	s.known.Delete(id)
	if n == 0 {
		return checkpoint.NotFound(id)
	}
	return nil
}

// Export returns the session's latest checkpoint, verified, as file bytes.
func (s *Store) Export(id string) ([]byte, error) {
	if !checkpoint.ValidID(id) {
		return nil, checkpoint.NotFound(id)
	}
	data, err := s.readData(`SELECT data FROM upgrade_agent_sessions WHERE id = $1`, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, checkpoint.NotFound(id)
	}
	if err != nil {
		return nil, s.wrap("export session "+id, err)
	}
	if _, _, err := checkpoint.Decode(s.Where(id), data, id); err != nil {
		return nil, err
	}
	return data, nil
}

// Import verifies a checkpoint file and stores it under its session id; the
// very same checkpoint is a no-op, other content under that id ErrExists.
func (s *Store) Import(path string) (string, error) {
	data, err := checkpoint.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("import checkpoint: %w", err)
	}
	cp, migrated, err := checkpoint.Decode(path, data, "")
	if err != nil {
		return "", fmt.Errorf("import checkpoint: %w", err)
	}
	id := cp.SessionID
	if migrated {
		if data, _, err = checkpoint.Encode(cp); err != nil {
			return "", fmt.Errorf("import checkpoint %s: encode: %w", path, err)
		}
	}
	if err := checkpoint.CheckSecrets(data, s.secrets); err != nil {
		return "", fmt.Errorf("import checkpoint %s: %w", path, err)
	}
	unlock, err := s.Lock(id)
	if err != nil {
		return "", err
	}
	defer unlock()
	sum := checkpoint.ChecksumOf(data)
	err = s.tx(func(ctx context.Context, tx pgx.Tx) error {
		var diskSeq int
		var disk []byte
		err := tx.QueryRow(ctx, `SELECT seq, data FROM upgrade_agent_sessions WHERE id = $1`, id).Scan(&diskSeq, &disk)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			_, err := tx.Exec(ctx, `INSERT INTO upgrade_agent_sessions (id, seq, status, updated_at, data) VALUES ($1, $2, $3, $4, $5)`,
				id, cp.Seq, string(cp.Status), cp.UpdatedAt, data)
			return s.wrap("import session "+id, err)
		case err != nil:
			return s.wrap("import session "+id, err)
		case diskSeq == cp.Seq && checkpoint.ChecksumOf(disk) == sum:
			return nil
		}
		return checkpoint.Exists(id, fmt.Sprintf(
			"import %s: session %s already exists in the store, at seq %d, and the file (seq %d) differs from it; nothing was changed. To take the file in instead, remove the stored session first: upgrade-agent sessions rm %s",
			path, id, diskSeq, cp.Seq, id))
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// History returns the seqs kept in the session's history, oldest first.
func (s *Store) History(id string) ([]int, error) {
	if !checkpoint.ValidID(id) {
		return nil, checkpoint.NotFound(id)
	}
	var seqs []int
	err := s.with(func(ctx context.Context, c *pgx.Conn) error {
		rs, err := c.Query(ctx, `SELECT seq FROM upgrade_agent_history WHERE session_id = $1 ORDER BY seq`, id)
		if err != nil {
			return err
		}
		seqs, err = pgx.CollectRows(rs, pgx.RowTo[int])
		return err
	})
	if err != nil {
		return nil, s.wrap("history of session "+id, err)
	}
	return seqs, nil
}

// LoadHistory reads an earlier checkpoint of the session.
func (s *Store) LoadHistory(id string, seq int) (*checkpoint.Checkpoint, error) {
	if !checkpoint.ValidID(id) {
		return nil, checkpoint.NotFound(id)
	}
	data, err := s.readData(`SELECT data FROM upgrade_agent_history WHERE session_id = $1 AND seq = $2`, id, seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %s has no checkpoint %d in its history: %w", id, seq, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap("history of session "+id, err)
	}
	where := s.whereHistory(id, seq)
	cp, _, err := checkpoint.Decode(where, data, id)
	if err != nil {
		return nil, err
	}
	if cp.Seq != seq {
		return nil, &checkpoint.CorruptError{Path: where, Reason: fmt.Sprintf("seq %d does not match its row", cp.Seq)}
	}
	return cp, nil
}
