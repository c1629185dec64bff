package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transport opens the connection to one MCP server. Connect builds one from
// ServerConfig.Command or URL; ServerConfig.Transport takes any other (tests
// use it for in-process servers, see mcptest.FromSDK).
type Transport interface {
	Connect(ctx context.Context) (Conn, error)
}

// Conn carries JSON-RPC messages, one JSON value per Read or Write, as the
// bytes that go over the wire.
type Conn interface {
	// Read returns the next message of the server. An error ends the
	// session: every request still waiting fails with it.
	Read(ctx context.Context) (json.RawMessage, error)
	// Write sends one message; it is called from several goroutines.
	Write(ctx context.Context, msg json.RawMessage) error
	// Close ends the connection; a Read in progress returns an error.
	Close() error
}

// protocolVersionSetter is implemented by a Conn that needs the negotiated
// version on every later message (streamable HTTP's Mcp-Protocol-Version).
type protocolVersionSetter interface {
	setProtocolVersion(v string)
}

// stdioTerminate is how long Close waits for a stdio server to exit after
// its stdin is closed, before SIGTERM (and again before SIGKILL).
const stdioTerminate = 2 * time.Second

// maxMessage bounds one message (a stdio line, an HTTP body, an SSE event):
// a server that sends more is cut off rather than allowed to fill memory.
const maxMessage = 64 << 20

// buildTransport returns the transport for one server, and for a stdio
// server the buffer that keeps the end of its stderr.
func buildTransport(cfg ServerConfig, opts Options) (Transport, *tailBuffer) {
	switch {
	case cfg.Transport != nil:
		return cfg.Transport, nil
	case cfg.Command != "":
		tail := &tailBuffer{max: 2048}
		var stderr io.Writer = tail
		if opts.Stderr != nil {
			stderr = io.MultiWriter(tail, opts.Stderr)
		}
		return &stdioTransport{command: cfg.Command, args: cfg.Args, env: serverEnv(cfg.Env), stderr: stderr}, tail
	default:
		headers := make(http.Header, len(cfg.Headers))
		for _, k := range sortedKeys(cfg.Headers) {
			headers.Set(k, expandVars(cfg.Headers[k]))
		}
		return &httpTransport{url: cfg.URL, headers: headers, client: &http.Client{}}, nil
	}
}

// stdioTransport starts a server as a child process and speaks
// newline-delimited JSON on its stdin and stdout.
type stdioTransport struct {
	command string
	args    []string
	env     []string
	stderr  io.Writer
}

func (t *stdioTransport) Connect(context.Context) (Conn, error) {
	cmd := exec.Command(t.command, t.args...)
	cmd.Env = t.env
	cmd.Stderr = t.stderr
	// Our own pipes rather than StdoutPipe: Wait then runs in the background
	// without closing the reading end under a Read.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	c := &stdioConn{
		lineConn: newLineConn(outR, inW, maxMessage),
		cmd:      cmd,
		stdin:    inW,
		stdout:   outR,
		exited:   make(chan struct{}),
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

type stdioConn struct {
	*lineConn
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File

	exited  chan struct{} // closed when Wait returned
	waitErr error         // set before exited is closed

	closeOnce sync.Once
	closeErr  error
}

func (c *stdioConn) Read(context.Context) (json.RawMessage, error) {
	msg, err := c.read()
	if errors.Is(err, io.EOF) {
		// The server closed its output, usually because it is exiting: say
		// how, if it does so promptly.
		select {
		case <-c.exited:
			if c.waitErr != nil {
				return nil, fmt.Errorf("the server exited: %w", c.waitErr)
			}
			return nil, errors.New("the server exited")
		case <-time.After(time.Second):
			return nil, errors.New("the server closed its standard output")
		}
	}
	return msg, err
}

func (c *stdioConn) Write(_ context.Context, msg json.RawMessage) error { return c.write(msg) }

// Close follows the MCP shutdown for stdio: close the server's stdin, wait,
// SIGTERM, wait, SIGKILL. A server that had already exited on its own (its
// loss was reported to the calls that waited) closes without error.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		select {
		case <-c.exited:
		default:
			c.closeErr = c.terminate()
		}
		_ = c.stdin.Close()
		_ = c.stdout.Close()
	})
	return c.closeErr
}

func (c *stdioConn) terminate() error {
	if err := c.stdin.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	// Nobody reads the server's output any more; closing it also frees a
	// server blocked writing to us.
	_ = c.stdout.Close()
	wait := func() (error, bool) {
		select {
		case <-c.exited:
			return c.waitErr, true
		case <-time.After(stdioTerminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if c.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server does not exit")
}

// lineConn reads and writes newline-delimited JSON.
type lineConn struct {
	r   *bufio.Reader
	max int
	wmu sync.Mutex
	w   io.Writer
}

func newLineConn(r io.Reader, w io.Writer, max int) *lineConn {
	return &lineConn{r: bufio.NewReaderSize(r, 64<<10), max: max, w: w}
}

// read returns the next non-blank line.
func (c *lineConn) read() (json.RawMessage, error) {
	for {
		line, err := readLine(c.r, c.max)
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (c *lineConn) write(msg json.RawMessage) error {
	if bytes.ContainsAny(msg, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, msg); err != nil {
			return err
		}
		msg = buf.Bytes()
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(append(msg[:len(msg):len(msg)], '\n'))
	return err
}

// errTooLarge: a message over the limit (maxMessage).
var errTooLarge = errors.New("a message from the server is too large")

// readLine reads up to and without the next '\n' (and a '\r' before it). A
// last line without '\n' is returned with io.EOF.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+2 {
			return nil, fmt.Errorf("%w (over %d bytes)", errTooLarge, max)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, err
	}
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
