package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// httpTransport speaks MCP's streamable HTTP: every message is a POST to the
// endpoint, answered by JSON, by an SSE stream that carries the response
// (and maybe requests of the server before it), or by 202 for a
// notification or a response. The standalone GET stream is not opened:
// nothing here waits for messages the server sends on its own.
type httpTransport struct {
	url     string
	headers http.Header
	client  *http.Client
}

func (t *httpTransport) Connect(context.Context) (Conn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	return &httpConn{t: t, ctx: ctx, cancel: cancel, incoming: make(chan json.RawMessage, 16)}, nil
}

// httpDeleteTimeout bounds the DELETE that ends the session on Close.
const httpDeleteTimeout = 2 * time.Second

type httpConn struct {
	t        *httpTransport
	ctx      context.Context // ends at Close
	cancel   context.CancelFunc
	incoming chan json.RawMessage

	mu        sync.Mutex
	sessionID string // Mcp-Session-Id from the initialize answer
	version   string // Mcp-Protocol-Version once negotiated

	closeOnce sync.Once
}

func (c *httpConn) setProtocolVersion(v string) {
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
}

func (c *httpConn) Read(ctx context.Context) (json.RawMessage, error) {
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.ctx.Done():
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *httpConn) newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.t.url, r)
	if err != nil {
		return nil, err
	}
	for k, v := range c.t.headers {
		req.Header[k] = v
	}
	c.mu.Lock()
	if c.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.sessionID)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	c.mu.Unlock()
	return req, nil
}

// Write posts one message. For a request it returns once the response is
// queued for Read (or fails): an answer stream that ends without it is an
// error of this Write, so a caller never waits for an answer that cannot come.
func (c *httpConn) Write(ctx context.Context, msg json.RawMessage) error {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(msg, &head); err != nil {
		return err
	}
	isRequest := head.Method != "" && len(head.ID) > 0

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	req, err := c.newRequest(ctx, http.MethodPost, msg)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.mu.Lock()
		if c.sessionID == "" {
			c.sessionID = sid
		}
		c.mu.Unlock()
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("HTTP %s: %s", resp.Status, strings.TrimSpace(strings.ToValidUTF8(string(snippet), "?")))
	}
	if !isRequest {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessage))
		return nil
	}
	if resp.StatusCode == http.StatusAccepted {
		return errors.New("the server accepted a request without answering it (HTTP 202)")
	}
	found, err := c.receive(ctx, resp, head.ID)
	if found {
		return nil
	}
	if err == nil {
		err = errors.New("no response in the answer")
	}
	return fmt.Errorf("the server's answer ended without the response: %w", err)
}

// receive queues the messages of one answer until the response to id.
func (c *httpConn) receive(ctx context.Context, resp *http.Response, id json.RawMessage) (bool, error) {
	found := false
	deliver := func(data []byte) error {
		for _, m := range splitBatch(data) {
			if isResponseTo(m, id) {
				found = true
			}
			select {
			case c.incoming <- m:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage+1))
		if err != nil {
			return false, err
		}
		if len(body) > maxMessage {
			return false, fmt.Errorf("%w (over %d bytes)", errTooLarge, maxMessage)
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return false, nil
		}
		err = deliver(body)
		return found, err
	case "text/event-stream":
		err := readSSE(bufio.NewReader(resp.Body), maxMessage, func(data []byte) (bool, error) {
			err := deliver(data)
			return found, err
		})
		return found, err
	}
	return false, fmt.Errorf("unexpected Content-Type %q", resp.Header.Get("Content-Type"))
}

// isResponseTo reports whether raw is a response (not a request) with id.
func isResponseTo(raw json.RawMessage, id json.RawMessage) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(raw, &m) == nil && m.Method == "" && bytes.Equal(bytes.TrimSpace(m.ID), id)
}

// readSSE calls message with the data of every "message" event until it
// reports stop, the stream ends (nil error) or fails.
func readSSE(r *bufio.Reader, max int, message func(data []byte) (stop bool, err error)) error {
	var event string
	var data []byte
	hasData := false
	for {
		line, err := readLine(r, max)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) == 0 && err == nil {
			// A blank line dispatches the event.
			if hasData && (event == "" || event == "message") {
				stop, derr := message(data)
				if derr != nil || stop {
					return derr
				}
			}
			event, data, hasData = "", nil, false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > max {
				return fmt.Errorf("%w (over %d bytes)", errTooLarge, max)
			}
			data = append(data, value...)
			hasData = true
		}
		if err != nil {
			// An event not ended by a blank line is dropped (SSE).
			return nil
		}
	}
}

// Close ends the session with a DELETE (errors ignored: the server may not
// support it, or be gone) and stops every request in flight.
func (c *httpConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		sid := c.sessionID
		c.mu.Unlock()
		if sid != "" {
			ctx, cancel := context.WithTimeout(context.Background(), httpDeleteTimeout)
			if req, err := c.newRequest(ctx, http.MethodDelete, nil); err == nil {
				if resp, err := c.t.client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
					resp.Body.Close()
				}
			}
			cancel()
		}
		c.cancel()
	})
	return nil
}
