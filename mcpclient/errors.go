package mcpclient

import (
	"errors"
	"fmt"
)

// Sentinels callers branch on with errors.Is.
var (
	// ErrUnknownTool: the qualified name is not offered by any connected server.
	ErrUnknownTool = errors.New("unknown MCP tool")
	// ErrServerUnavailable: the server is not connected (it failed at Connect,
	// or it is not in the config any more).
	ErrServerUnavailable = errors.New("MCP server not connected")
	// ErrBadHandle: a JobHandle that cannot be followed (empty key, unknown kind).
	ErrBadHandle = errors.New("invalid MCP job handle")
	// ErrJobNotFinished: FetchJob was asked for a job that is still running.
	ErrJobNotFinished = errors.New("MCP job not finished")
	// ErrBadStatus: the server answered a status request in a shape this
	// package cannot read (a protocol problem, not a failed job).
	ErrBadStatus = errors.New("unreadable MCP job status")
)

// Operations a ServerError can name.
const (
	OpConfig     = "config"
	OpStart      = "start"
	OpInitialize = "initialize"
	OpListTools  = "list tools"
)

// ServerError reports a server that was skipped (or a tool of it that was
// skipped) by Connect. It always names the server.
type ServerError struct {
	Server string
	Op     string // OpConfig, OpStart, OpInitialize, OpListTools
	// Stderr is the tail of a stdio server's standard error, when it wrote
	// any: usually the real reason it did not start.
	Stderr string
	Err    error
}

func (e *ServerError) Error() string {
	msg := fmt.Sprintf("mcp server %q: %s: %v", e.Server, e.Op, e.Err)
	if e.Stderr != "" {
		msg += " (stderr: " + e.Stderr + ")"
	}
	return msg
}

func (e *ServerError) Unwrap() error { return e.Err }
