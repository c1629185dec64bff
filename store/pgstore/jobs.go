package pgstore

import (
	"context"
	"errors"
	"io/fs"

	"github.com/jackc/pgx/v5"
)

// Jobs is the job records of the store (jobs.RecordBackend): one row per
// job, each change under the row's lock (SELECT ... FOR UPDATE), so workers
// and resumes on any machine see one order of claims and commits.
type Jobs struct{ s *Store }

// Jobs returns the store's job records.
func (s *Store) Jobs() *Jobs { return &Jobs{s: s} }

// Where names a job's row.
func (j *Jobs) Where(id string) string {
	return "postgres " + j.s.cfg.Database + " upgrade_agent_jobs id=" + id
}

// Get returns the record's bytes, fs.ErrNotExist when there is none.
func (j *Jobs) Get(id string) ([]byte, error) {
	data, err := j.s.readData(`SELECT data FROM upgrade_agent_jobs WHERE id = $1`, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fs.ErrNotExist
	}
	return data, j.s.wrap("load job "+id, err)
}

// Create inserts the record unless one with its id exists.
func (j *Jobs) Create(id string, data []byte) ([]byte, bool, error) {
	var existing []byte
	created := false
	err := j.s.tx(func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO upgrade_agent_jobs (id, data) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, data)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			created = true
			return nil
		}
		return tx.QueryRow(ctx, `SELECT data FROM upgrade_agent_jobs WHERE id = $1`, id).Scan(&existing)
	})
	if err != nil {
		return nil, false, j.s.wrap("create job "+id, err)
	}
	return existing, created, nil
}

// Update changes the record under its row lock.
func (j *Jobs) Update(id string, fn func(cur []byte) ([]byte, error)) error {
	var fnErr error
	err := j.s.tx(func(ctx context.Context, tx pgx.Tx) error {
		var cur []byte
		err := tx.QueryRow(ctx, `SELECT data FROM upgrade_agent_jobs WHERE id = $1 FOR UPDATE`, id).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		next, err := fn(cur)
		if err != nil {
			fnErr = err
			return nil
		}
		if next == nil {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE upgrade_agent_jobs SET data = $2 WHERE id = $1`, id, next)
		return err
	})
	if err != nil {
		return j.s.wrap("update job "+id, err)
	}
	return fnErr
}

// List returns every record.
func (j *Jobs) List() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := j.s.with(func(ctx context.Context, c *pgx.Conn) error {
		rs, err := c.Query(ctx, `SELECT id, data FROM upgrade_agent_jobs`)
		if err != nil {
			return err
		}
		for rs.Next() {
			var id string
			var data []byte
			if err := rs.Scan(&id, &data); err != nil {
				return err
			}
			out[id] = data
		}
		return rs.Err()
	})
	return out, j.s.wrap("list jobs", err)
}
