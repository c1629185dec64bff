package mcpclient

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTerminate is how long Close waits for a stdio server to exit after
// its stdin is closed, before SIGTERM.
const stdioTerminate = 2 * time.Second

// buildTransport returns the SDK transport for one server, and for a stdio
// server the buffer that keeps the end of its stderr.
func buildTransport(cfg ServerConfig, st *wireState, opts Options) (mcp.Transport, *tailBuffer) {
	switch {
	case cfg.Transport != nil:
		return cfg.Transport, nil
	case cfg.Command != "":
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Env = serverEnv(cfg.Env)
		tail := &tailBuffer{max: 2048}
		if opts.Stderr != nil {
			cmd.Stderr = io.MultiWriter(tail, opts.Stderr)
		} else {
			cmd.Stderr = tail
		}
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: stdioTerminate}, tail
	default:
		headers := make(http.Header, len(cfg.Headers))
		for _, k := range sortedKeys(cfg.Headers) {
			headers.Set(k, expandVars(cfg.Headers[k]))
		}
		return &mcp.StreamableClientTransport{
			Endpoint: cfg.URL,
			HTTPClient: &http.Client{Transport: &headerTransport{
				base:    http.DefaultTransport,
				headers: headers,
				state:   st,
			}},
			// Server-initiated messages are not used; and the stream would
			// start only after a hook the connection wrapper cannot forward.
			DisableStandaloneSSE: true,
		}, nil
	}
}

// headerTransport adds the configured headers, and the negotiated protocol
// version when the SDK did not set it: the SDK learns that version through
// a hook on its own connection type, which wireConn hides.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	state   *wireState
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header[k] = v
	}
	if req.Header.Get("Mcp-Protocol-Version") == "" {
		if v, _ := t.state.snapshot(); v != "" {
			req.Header.Set("Mcp-Protocol-Version", v)
		}
	}
	return t.base.RoundTrip(req)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(b.buf), "?"))
}
