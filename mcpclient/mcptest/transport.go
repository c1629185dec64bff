package mcptest

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
)

// FromSDK adapts an SDK client transport (the client end of
// mcp.NewInMemoryTransports, say) to mcpclient.Transport, so mcpclient's
// own JSON-RPC client talks to an SDK-built server in-process. Messages go
// through the SDK's encoder and decoder, as they would on a real wire.
func FromSDK(t mcp.Transport) mcpclient.Transport { return sdkTransport{t} }

type sdkTransport struct{ inner mcp.Transport }

func (t sdkTransport) Connect(ctx context.Context) (mcpclient.Conn, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return sdkConn{c}, nil
}

type sdkConn struct{ inner mcp.Connection }

func (c sdkConn) Read(ctx context.Context) (json.RawMessage, error) {
	msg, err := c.inner.Read(ctx)
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(msg)
}

func (c sdkConn) Write(ctx context.Context, raw json.RawMessage) error {
	msg, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		return err
	}
	return c.inner.Write(ctx, msg)
}

func (c sdkConn) Close() error { return c.inner.Close() }
