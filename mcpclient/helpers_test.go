package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

// serverModeEnv makes the test binary an MCP server on stdio (the re-exec
// pattern: no separate build). Its value is the JSON of mcptest.Options,
// "crash" for a server that dies before answering, or "hang" for one that
// never answers.
const serverModeEnv = "MCPCLIENT_TEST_SERVER"

func TestMain(m *testing.M) {
	mode := os.Getenv(serverModeEnv)
	switch mode {
	case "":
		os.Exit(m.Run())
	case "crash":
		fmt.Fprintln(os.Stderr, "testserver: cannot open the database")
		os.Exit(3)
	case "hang": // reads requests, never answers, leaves when stdin closes
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if behaviour, ok := strings.CutPrefix(mode, "raw:"); ok {
		os.Exit(runRawServer(behaviour))
	}
	var opts mcptest.Options
	if err := json.Unmarshal([]byte(mode), &opts); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %s: %v\n", serverModeEnv, err)
		os.Exit(2)
	}
	srv, err := mcptest.New(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
		os.Exit(2)
	}
	if err := srv.Serve(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// testCtx bounds every test; nothing here should take more than seconds.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newServer(t *testing.T, opts mcptest.Options) *mcptest.Server {
	t.Helper()
	srv, err := mcptest.New(opts)
	if err != nil {
		t.Fatalf("mcptest.New: %v", err)
	}
	return srv
}

// memConfig opens a new in-memory session to srv: each Manager needs its own.
func memConfig(t *testing.T, srv *mcptest.Server, name string) mcpclient.ServerConfig {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return mcpclient.ServerConfig{Name: name, Transport: mcptest.FromSDK(ct)}
}

// stdioConfig runs the test binary itself as a stdio server.
func stdioConfig(t *testing.T, name string, opts mcptest.Options) mcpclient.ServerConfig {
	t.Helper()
	b, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	return mcpclient.ServerConfig{Name: name, Command: os.Args[0], Env: map[string]string{
		serverModeEnv: string(b),
		// Under -race the child would otherwise linger a second at exit.
		"GORACE": "atexit_sleep_ms=0",
	}}
}

// connect fails the test on any server error and closes the Manager at the end.
func connect(t *testing.T, opts mcpclient.Options, cfgs ...mcpclient.ServerConfig) *mcpclient.Manager {
	t.Helper()
	m, errs := mcpclient.Connect(testCtx(t), cfgs, opts)
	for _, err := range errs {
		t.Errorf("Connect: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func mustCall(t *testing.T, m *mcpclient.Manager, tool, args, effectID string) *mcpclient.CallResult {
	t.Helper()
	res, err := m.Call(testCtx(t), tool, json.RawMessage(args), effectID)
	if err != nil {
		t.Fatalf("Call(%s, %s): %v", tool, args, err)
	}
	return res
}

func mustStatus(t *testing.T, m *mcpclient.Manager, h mcpclient.JobHandle) mcpclient.JobStatus {
	t.Helper()
	st, err := m.JobStatus(testCtx(t), h)
	if err != nil {
		t.Fatalf("JobStatus(%+v): %v", h, err)
	}
	return st
}

func mustFetch(t *testing.T, m *mcpclient.Manager, h mcpclient.JobHandle) *mcpclient.CallResult {
	t.Helper()
	res, err := m.FetchJob(testCtx(t), h)
	if err != nil {
		t.Fatalf("FetchJob(%+v): %v", h, err)
	}
	return res
}

// recordingTransport keeps the JSON of every message, as it is on the wire.
type recordingTransport struct {
	inner mcpclient.Transport
	mu    sync.Mutex
	sent  []string
	recvd []string
}

func (r *recordingTransport) Connect(ctx context.Context) (mcpclient.Conn, error) {
	c, err := r.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, rec: r}, nil
}

func (r *recordingTransport) messages(sent bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sent {
		return append([]string(nil), r.sent...)
	}
	return append([]string(nil), r.recvd...)
}

type recordingConn struct {
	mcpclient.Conn
	rec *recordingTransport
}

func (c *recordingConn) Write(ctx context.Context, msg json.RawMessage) error {
	c.rec.mu.Lock()
	c.rec.sent = append(c.rec.sent, string(msg))
	c.rec.mu.Unlock()
	return c.Conn.Write(ctx, msg)
}

func (c *recordingConn) Read(ctx context.Context) (json.RawMessage, error) {
	msg, err := c.Conn.Read(ctx)
	if err == nil {
		c.rec.mu.Lock()
		c.rec.recvd = append(c.rec.recvd, string(msg))
		c.rec.mu.Unlock()
	}
	return msg, err
}

// findMessage returns the first message that contains every fragment.
func findMessage(msgs []string, fragments ...string) (string, bool) {
next:
	for _, m := range msgs {
		for _, f := range fragments {
			if !strings.Contains(m, f) {
				continue next
			}
		}
		return m, true
	}
	return "", false
}
