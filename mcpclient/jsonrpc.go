package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// JSON-RPC 2.0 as MCP uses it: one message per Conn.Read/Write, requests
// with ids, responses, notifications. Batches are not part of MCP since
// 2025-06-18 and are not sent; a batch received is split (see splitBatch).

// message is any JSON-RPC message; which one it is follows from the fields
// present (see kind).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// Standard JSON-RPC error codes used here.
const (
	codeMethodNotFound = -32601
)

// rpcError is a JSON-RPC error object: the server refused a request.
type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("JSON-RPC error %d", e.Code)
	}
	return e.Message
}

// connLostError: the connection ended while a request waited for its answer.
type connLostError struct {
	err    error
	stderr string
}

func (e *connLostError) Error() string {
	msg := "connection to the server lost"
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	if e.stderr != "" {
		msg += " (stderr: " + e.stderr + ")"
	}
	return msg
}

func (e *connLostError) Unwrap() error { return e.err }

// session is one JSON-RPC connection to a server: it numbers the requests,
// matches answers to them, answers the server's own requests and ignores its
// notifications.
type session struct {
	conn   Conn
	logger *slog.Logger
	// tail is a stdio server's stderr, added to connection-lost errors once
	// the session is up (at Connect, ServerError carries it already).
	tail *tailBuffer

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan *message
	withTail bool
	stopped  bool          // the read loop ended; no new requests
	done     chan struct{} // closed when the read loop ends
	err      error         // why it ended, set with stopped
}

func newSession(conn Conn, logger *slog.Logger, tail *tailBuffer) *session {
	s := &session{conn: conn, logger: logger, tail: tail, pending: map[int64]chan *message{}, done: make(chan struct{})}
	go s.readLoop()
	return s
}

func (s *session) readLoop() {
	var err error
	for err == nil {
		var raw json.RawMessage
		raw, err = s.conn.Read(context.Background())
		if err != nil {
			break
		}
		for _, one := range splitBatch(raw) {
			var msg message
			if jerr := json.Unmarshal(one, &msg); jerr != nil {
				// The stream cannot be trusted after a message that is not
				// JSON: fail every waiting request rather than guess.
				err = fmt.Errorf("invalid JSON from the server: %w", jerr)
				break
			}
			s.dispatch(&msg)
		}
	}
	s.mu.Lock()
	s.err = err
	s.stopped = true
	pending := s.pending
	s.pending = map[int64]chan *message{}
	s.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
	// Ends a server that broke the connection (or the rest of ours); the
	// error was the waiting requests' to report.
	_ = s.conn.Close()
	close(s.done)
}

func (s *session) dispatch(msg *message) {
	hasID := len(msg.ID) > 0 && string(msg.ID) != "null"
	switch {
	case msg.Method != "" && hasID:
		s.answer(msg)
	case msg.Method != "":
		s.logger.Debug("mcp notification ignored", "method", msg.Method)
	case hasID:
		id, err := strconv.ParseInt(string(msg.ID), 10, 64)
		s.mu.Lock()
		ch, ok := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if err != nil || !ok {
			s.logger.Debug("mcp answer to an unknown request ignored", "id", string(msg.ID))
			return
		}
		ch <- msg
	default:
		s.logger.Debug("mcp message without method or id ignored")
	}
}

// answer replies to a request of the server: ping gets the empty result;
// sampling, roots and elicitation are not offered, so anything else is
// "method not found".
func (s *session) answer(req *message) {
	resp := message{JSONRPC: "2.0", ID: req.ID}
	if req.Method == "ping" {
		resp.Result = json.RawMessage(`{}`)
	} else {
		resp.Error = &rpcError{Code: codeMethodNotFound, Message: "method not found: " + req.Method}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	// Answered off the read loop: an HTTP answer is a POST that must not
	// hold up the messages behind it.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
		defer cancel()
		if err := s.conn.Write(ctx, b); err != nil {
			s.logger.Debug("mcp answer to a server request failed", "method", req.Method, "error", err)
		}
	}()
}

// answerTimeout bounds writing an answer to a server request and the
// best-effort cancellation notice.
const answerTimeout = 5 * time.Second

// call sends a request and decodes the result into out (when not nil).
func (s *session) call(ctx context.Context, method string, params, out any) error {
	if err := s.callRaw(ctx, method, params, out); err != nil {
		return fmt.Errorf("calling %q: %w", method, err)
	}
	return nil
}

func (s *session) callRaw(ctx context.Context, method string, params, out any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	ch := make(chan *message, 1)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return s.lostError()
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.mu.Unlock()

	b, err := json.Marshal(message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: p})
	if err != nil {
		s.forget(id)
		return err
	}
	if err := s.conn.Write(ctx, b); err != nil {
		s.forget(id)
		if ctx.Err() != nil {
			// Over HTTP the request may have reached the server.
			s.cancelled(id, ctx.Err())
			return ctx.Err()
		}
		s.mu.Lock()
		stopped := s.stopped
		s.mu.Unlock()
		if stopped {
			return s.lostError()
		}
		return err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return s.lostError()
		}
		if resp.Error != nil {
			return resp.Error
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(resp.Result, out); err != nil {
			return fmt.Errorf("decoding the result: %w", err)
		}
		return nil
	case <-ctx.Done():
		s.forget(id)
		s.cancelled(id, ctx.Err())
		return ctx.Err()
	}
}

func (s *session) forget(id int64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// cancelled tells the server, best effort, that nobody waits for the answer.
func (s *session) cancelled(id int64, reason error) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
		defer cancel()
		_ = s.notify(ctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": reason.Error()})
	}()
}

func (s *session) notify(ctx context.Context, method string, params any) error {
	msg := message{JSONRPC: "2.0", Method: method}
	if params != nil {
		p, err := json.Marshal(params)
		if err != nil {
			return err
		}
		msg.Params = p
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return s.conn.Write(ctx, b)
}

func (s *session) lostError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &connLostError{err: s.err}
	if s.withTail {
		e.stderr = s.tail.String()
	}
	return e
}

// ready marks the session as handed to the Manager: from now on a lost
// connection reports the server's stderr itself.
func (s *session) ready() {
	s.mu.Lock()
	s.withTail = true
	s.mu.Unlock()
}

// close ends the connection. Once the connection was lost, how the server
// ended was reported to the requests that waited, and close reports nothing.
func (s *session) close() error {
	s.mu.Lock()
	lost := s.stopped
	s.mu.Unlock()
	err := s.conn.Close()
	<-s.done
	if lost {
		return nil
	}
	return err
}

// splitBatch returns the messages of a JSON array, or raw itself.
func splitBatch(raw json.RawMessage) []json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return []json.RawMessage{raw}
	}
	var batch []json.RawMessage
	if json.Unmarshal(trimmed, &batch) != nil {
		return []json.RawMessage{raw} // reported as invalid by the caller
	}
	return batch
}

// errClosed is what a Conn returns once Close was called.
var errClosed = errors.New("connection closed")
