// Package pgtest starts a throwaway PostgreSQL cluster for tests and the
// bench program: initdb in a temp dir, a server on a loopback port with
// password (scram-sha-256) authentication, stopped and removed at the end.
// It uses Debian's server binaries (pg_config --bindir, or
// /usr/lib/postgresql/*/bin). No mock of PostgreSQL stands in for it.
//
// initdb and postgres refuse to run as root: as root, the cluster runs as
// the unprivileged user "postgres" (created with useradd when missing).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvRequire is the variable that turns a missing PostgreSQL into a test
// failure: UPGRADE_AGENT_TEST_POSTGRES=require.
const EnvRequire = "UPGRADE_AGENT_TEST_POSTGRES"

// InstallHint says how to get the binaries.
const InstallHint = "PostgreSQL server binaries not found (initdb, postgres); install them with `apt-get install postgresql` (Debian/Ubuntu) or run `bash .ci/run`, which does; set " + EnvRequire + "=require to make their absence a failure"

// ErrNoBinaries: no PostgreSQL server binaries on this machine.
var ErrNoBinaries = errors.New(InstallHint)

// Admin is the superuser of a test cluster.
const Admin = "ua_admin"

// Cluster is a running throwaway server.
type Cluster struct {
	Dir      string
	Port     int
	Password string // the admin's, also used for roles the tests create

	cmd  *exec.Cmd
	bin  string
	args []string
	cred *syscall.Credential
}

// Options of Start.
type Options struct {
	// Durable keeps fsync on (the bench measures with it); tests turn it off.
	Durable bool
}

// BinDir finds the server binaries, "" when there are none.
func BinDir() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if fileExists(filepath.Join(d, "initdb")) {
			return d
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Start initialises and starts a cluster.
func Start(o Options) (*Cluster, error) {
	bin := BinDir()
	if bin == "" {
		return nil, ErrNoBinaries
	}
	dir, err := os.MkdirTemp("", "upgrade-agent-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Password: "pw-" + randHex(12)}
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	cred, err := serverUser(dir)
	if err != nil {
		return fail(err)
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(c.Password+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if err := chownTree(dir, cred); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", Admin, "--auth=scram-sha-256",
		"--pwfile="+pwfile, "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	asUser(initdb, cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v: %s", err, out))
	}
	_ = os.Remove(pwfile)
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	c.Port = port
	args := []string{"-D", data, "-p", fmt.Sprint(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB"}
	if !o.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	c.bin, c.args, c.cred = bin, args, cred
	if err := c.serve(); err != nil {
		return fail(err)
	}
	return c, nil
}

// serve starts the server on the cluster's port and waits until it takes
// connections.
func (c *Cluster) serve() error {
	srv := exec.Command(filepath.Join(c.bin, "postgres"), c.args...)
	srv.Dir = c.Dir
	logf, err := os.OpenFile(filepath.Join(c.Dir, "server.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	srv.Stdout, srv.Stderr = logf, logf
	asUser(srv, c.cred)
	if err := srv.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	_ = logf.Close()
	c.cmd = srv
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.URL("postgres", Admin, c.Password))
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
			return fmt.Errorf("postgres did not accept connections within 60s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart stops the server (fast shutdown: every connection ends) and
// starts it again on the same port, as an operator's restart does.
func (c *Cluster) Restart() error {
	c.shutdown()
	return c.serve()
}

// Dedicated starts a cluster of the test's own (for a test that restarts
// it), stopped when the test ends; skipped as Need skips.
func Dedicated(t testing.TB) *Cluster {
	t.Helper()
	c, err := Start(Options{})
	if err != nil {
		if errors.Is(err, ErrNoBinaries) && os.Getenv(EnvRequire) != "require" {
			t.Skip(InstallHint)
		}
		t.Fatalf("PostgreSQL for tests: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// URL is a loopback URL for db as user.
func (c *Cluster) URL(db, user, password string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", user, password, c.Port, db)
}

// Exec runs SQL as the admin in db.
func (c *Cluster) Exec(db, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL(db, Admin, c.Password))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

var dbSeq struct {
	sync.Mutex
	n int
}

// NewDatabase creates a fresh database and returns the admin's URL for it.
func (c *Cluster) NewDatabase() (string, error) {
	dbSeq.Lock()
	dbSeq.n++
	name := fmt.Sprintf("t%d_%s", dbSeq.n, randHex(4))
	dbSeq.Unlock()
	if err := c.Exec("postgres", "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return c.URL(name, Admin, c.Password), nil
}

// Stop shuts the server down (fast) and removes its folder.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	c.shutdown()
	_ = os.RemoveAll(c.Dir)
}

// shutdown stops the server process (SIGINT: fast shutdown).
func (c *Cluster) shutdown() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
	c.cmd = nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var shared struct {
	sync.Mutex
	c   *Cluster
	err error
	did bool
}

// Need returns the test binary's shared cluster, started on first use, or
// skips the test (fails it under UPGRADE_AGENT_TEST_POSTGRES=require) when
// PostgreSQL is missing. Call StopShared from TestMain.
func Need(t testing.TB) *Cluster {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.did {
		shared.did = true
		shared.c, shared.err = Start(Options{})
	}
	if shared.err != nil {
		if errors.Is(shared.err, ErrNoBinaries) && os.Getenv(EnvRequire) != "require" {
			t.Skip(InstallHint)
		}
		t.Fatalf("PostgreSQL for tests: %v", shared.err)
	}
	return shared.c
}

// StopShared stops the cluster Need started, if any.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	shared.c.Stop()
	shared.c = nil
}

// Main runs the tests and then stops the shared cluster: TestMain(m) { pgtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}
