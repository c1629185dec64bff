package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/checkpoint/storetest"
	"github.com/upgrade-agent/upgrade-agent/internal/pgtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs/jobstest"
	"github.com/upgrade-agent/upgrade-agent/store/pgstore"
)

func TestMain(m *testing.M) {
	storetest.MaybeHold(func(url string) (checkpoint.SessionStore, error) {
		return pgstore.Open(context.Background(), url, pgstore.Options{})
	})
	pgtest.Main(m)
}

func open(t testing.TB, url string, secrets ...string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// connect is a direct connection to url; the caller closes it.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newDatabase is a new empty database on the test cluster.
func newDatabase(t *testing.T) (*pgtest.Cluster, string) {
	t.Helper()
	c := pgtest.Need(t)
	url, err := c.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return c, url
}

func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	c := connect(t, url)
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func raw(t *testing.T, url, id string) []byte {
	t.Helper()
	c := connect(t, url)
	defer c.Close(context.Background())
	var b []byte
	if err := c.QueryRow(context.Background(), `SELECT data FROM upgrade_agent_sessions WHERE id = $1`, id).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPostgresStoreConformance runs the suite against a real PostgreSQL.
func TestPostgresStoreConformance(t *testing.T) {
	c := pgtest.Need(t)
	storetest.Run(t, storetest.Harness{
		Fresh: func(t *testing.T) string {
			url, err := c.NewDatabase()
			if err != nil {
				t.Fatal(err)
			}
			return url
		},
		Open: func(t *testing.T, url string, secrets ...string) checkpoint.SessionStore {
			s, err := pgstore.Open(context.Background(), url, pgstore.Options{Secrets: secrets,
				WriteDeadline: time.Second, LeaseMargin: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Raw: raw,
		Corrupt: func(t *testing.T, url, id string, data []byte) {
			exec(t, url, `UPDATE upgrade_agent_sessions SET data = $2 WHERE id = $1`, id, data)
		},
		Audit: func(t *testing.T, url string) audit.Log { return open(t, url).Audit() },
		Ahead: func(t *testing.T, s checkpoint.SessionStore) audit.Ahead { return s.(*pgstore.Store).Audit() },
		Tamper: func(t *testing.T, url, op string) bool {
			second := `(SELECT n FROM upgrade_agent_audit ORDER BY n OFFSET 1 LIMIT 1)`
			switch op {
			case storetest.TamperEdit:
				exec(t, url, `UPDATE upgrade_agent_audit SET entry = jsonb_set(entry, '{actor}', '"mallory"') WHERE n = `+second)
			case storetest.TamperRemove:
				exec(t, url, `DELETE FROM upgrade_agent_audit WHERE n = `+second)
			case storetest.TamperBackdated:
				// As the app role, every column given: the trigger restamps them.
				app := appRole(t, c, url)
				exec(t, app, `INSERT INTO upgrade_agent_audit (n, at, db_user, prev, hash, entry)
					VALUES (2, '2020-01-01', 'someone_else', '', '', '{"event":"approved","actor":"mallory","session_id":"s1"}')`)
				return true
			}
			return false
		},
		BreakAudit: func(t *testing.T, url string) {
			exec(t, url, `ALTER TABLE upgrade_agent_audit ADD CONSTRAINT broken_for_test CHECK (false) NOT VALID`)
		},
		LoseLocks: func(t *testing.T, variant string) (string, func()) {
			if variant == storetest.LoseRestart {
				dc := pgtest.Dedicated(t)
				url, err := dc.NewDatabase()
				if err != nil {
					t.Fatal(err)
				}
				return url, func() {
					if err := dc.Restart(); err != nil {
						t.Fatal(err)
					}
				}
			}
			url, err := c.NewDatabase()
			if err != nil {
				t.Fatal(err)
			}
			app := "lockloss" + strings.ToLower(rand.Text()[:6])
			url += "&idle_session_timeout=700&application_name=" + app
			return url, func() {
				// Until the server has ended every idle connection of the
				// holder (its lock's among them).
				deadline := time.Now().Add(20 * time.Second)
				for {
					var n int
					ac := connect(t, c.URL("postgres", pgtest.Admin, c.Password))
					err := ac.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
					_ = ac.Close(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d connections outlived idle_session_timeout", n)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		},
	})
}

// TestPostgresJobConformance runs the job records' suite against a real
// PostgreSQL: the records in the database, the job store's folder only for
// the workers' logs.
func TestPostgresJobConformance(t *testing.T) {
	c := pgtest.Need(t)
	jobstest.Run(t, jobstest.Harness{
		Fresh: func(t *testing.T) string {
			url, err := c.NewDatabase()
			if err != nil {
				t.Fatal(err)
			}
			return url
		},
		Open: func(t *testing.T, url string) *jobs.Store {
			s, err := jobs.OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			s.Backend = open(t, url).Jobs()
			return s
		},
	})
}

// appRole creates a least-privilege role for url's database and returns
// its URL there.
func appRole(t *testing.T, c *pgtest.Cluster, url string) string {
	t.Helper()
	role := "app_" + strings.ToLower(rand.Text()[:8])
	for _, q := range LeastPrivilegeGrants(role, c.Password) {
		exec(t, url, q)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return c.URL(cfg.Database, role, c.Password)
}

// TestSchemaNewerIsRefused: a database migrated by a newer binary is refused
// with both versions named, and nothing is written to it.
func TestSchemaNewerIsRefused(t *testing.T) {
	_, url := newDatabase(t)
	open(t, url)
	exec(t, url, `UPDATE upgrade_agent_schema SET version = 99`)
	_, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if !errors.Is(err, pgstore.ErrSchemaNewer) || !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), fmt.Sprintf("version %d", pgstore.SchemaVersion)) {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// TestConcurrentMigration: machines starting at once on an empty database
// all succeed; the schema is made once.
func TestConcurrentMigration(t *testing.T) {
	_, url := newDatabase(t)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
			if err == nil {
				_ = s.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	conn := connect(t, url)
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM upgrade_agent_schema`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("schema rows %d %v, want 1", n, err)
	}
}

// TestPasswordNeverInErrors: a refused login and a bad URL name neither the
// password nor hide which store failed.
func TestPasswordNeverInErrors(t *testing.T) {
	c := pgtest.Need(t)
	const pw = "wrong-Secret-pw-1234"
	url := c.URL("postgres", pgtest.Admin, pw)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("login with a wrong password: %v", err)
	}
	_, err = pgstore.Open(ctx, "postgres://u:"+pw+"@127.0.0.1:notaport/db", pgstore.Options{})
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("bad URL: %v", err)
	}
}

// TestAuditDBUserFilledByDatabase: db_user is the authenticated role, set
// by the database whatever the client sends, and the trail is append-only
// for a least-privilege role.
func TestAuditDBUserFilledByDatabase(t *testing.T) {
	c, url := newDatabase(t)
	open(t, url) // the owner migrates
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	role := "ua_app_" + db
	for _, q := range LeastPrivilegeGrants(role, c.Password) {
		exec(t, url, q)
	}
	app := c.URL(db, role, c.Password)
	s := open(t, app)
	if err := s.Audit().Append(audit.Entry{Time: time.Now().UTC(), Event: audit.Approved, Actor: "mallory", DBUser: "someone-else", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Audit().Read(audit.Filter{})
	if err != nil || len(got) != 1 || got[0].DBUser != role {
		t.Fatalf("entries %+v %v, want db_user %s", got, err, role)
	}
	conn := connect(t, app)
	defer conn.Close(context.Background())
	for _, q := range []string{`UPDATE upgrade_agent_audit SET entry = '{}'`, `DELETE FROM upgrade_agent_audit`} {
		if _, err := conn.Exec(context.Background(), q); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s as the app role: %v, want permission denied", q, err)
		}
	}
}

// TestReconnectAcrossRestart: a restart of PostgreSQL between two
// statements costs a reconnect, not the handle: the next save, load and
// audit append succeed.
func TestReconnectAcrossRestart(t *testing.T) {
	dc := pgtest.Dedicated(t)
	url, err := dc.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, url)
	cp := &checkpoint.Checkpoint{SessionID: "rc1", Status: checkpoint.StatusIdle, State: []byte(`{"turn":1}`)}
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	if err := dc.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(cp); err != nil {
		t.Fatalf("save after a restart: %v", err)
	}
	if err := dc.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load("rc1"); err != nil || got.Seq != 2 {
		t.Fatalf("load after a restart: %v, %v", got, err)
	}
	if err := s.Audit().Append(audit.Entry{Event: audit.Proposed, SessionID: "rc1"}); err != nil {
		t.Fatalf("append after a restart: %v", err)
	}
}

// TestFencedByToken: once another process has raised the session's token,
// neither a save nor a write that no save announced (a repeat after
// reconciliation) goes ahead; before that, AnnounceWrite leases the session
// and gives the write its deadline.
func TestFencedByToken(t *testing.T) {
	_, url := newDatabase(t)
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{WriteDeadline: 2 * time.Second, LeaseMargin: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	unlock, err := s.Lock("ft1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cp := &checkpoint.Checkpoint{SessionID: "ft1", Status: checkpoint.StatusIdle, State: []byte(`{"turn":1}`)}
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	d, err := s.AnnounceWrite("ft1")
	if err != nil || d.Before(before.Add(2*time.Second)) || d.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("AnnounceWrite: deadline %v (%v), want 2s from now", d, err)
	}
	var live bool
	c := connect(t, url)
	defer c.Close(context.Background())
	if err := c.QueryRow(context.Background(), `SELECT lease_until > now() + interval '2 seconds' FROM upgrade_agent_locks WHERE session_id = 'ft1'`).Scan(&live); err != nil || !live {
		t.Fatalf("lease after AnnounceWrite: live past the deadline %v (%v), want deadline + margin", live, err)
	}
	if err := s.WriteReturned("ft1", false); err != nil {
		t.Fatal(err)
	}
	exec(t, url, `UPDATE upgrade_agent_locks SET token = token + 1 WHERE session_id = 'ft1'`)
	if _, err := s.AnnounceWrite("ft1"); !errors.Is(err, checkpoint.ErrLocked) {
		t.Errorf("AnnounceWrite after the token moved on: %v, want ErrLocked", err)
	}
	if err := s.Save(cp); !errors.Is(err, checkpoint.ErrLocked) {
		t.Errorf("save after the token moved on: %v, want ErrLocked", err)
	}
}

// TestLockOnTheStoreConnection: a process that holds sessions has one
// connection to the store, not one more per lock (each is a backend and a
// scram handshake: about 20 ms on the two-core machine), and a lock it
// releases is free for another process at once.
func TestLockOnTheStoreConnection(t *testing.T) {
	_, url := newDatabase(t)
	app := "onelock" + strings.ToLower(rand.Text()[:6])
	s := open(t, url+"&application_name="+app)
	unlockA, err := s.Lock("one1")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := s.Lock("one2")
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, url)
	defer conn.Close(context.Background())
	var backends, locks int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&backends); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`, app).Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if backends != 1 || locks != 2 {
		t.Fatalf("a store holding two sessions: %d connections and %d advisory locks, want 1 and 2", backends, locks)
	}
	other := open(t, url)
	if _, err := other.Lock("one1"); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("another process locking a held session: %v, want ErrLocked", err)
	}
	unlockA()
	u, err := other.Lock("one1")
	if err != nil {
		t.Fatalf("a released session, at once: %v", err)
	}
	u()
	unlockB()
	if _, err := s.Lock("one2"); err != nil {
		t.Fatalf("locking again a session this process released: %v", err)
	}
}
