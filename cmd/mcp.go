package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// connectMCP starts the MCP servers of the config for this run (nil: none
// configured). A server that fails is reported on stderr and left out; the
// agent works on without it. The capabilities negotiated in earlier runs
// come from the session's checkpoint.
func connectMCP(ctx context.Context, f *Factory, sess *pipeline.Session) *mcpclient.Manager {
	cfg := f.opts().Config
	if cfg == nil || len(cfg.MCPServers) == 0 {
		return nil
	}
	var servers []mcpclient.ServerConfig
	for _, s := range cfg.MCPServers {
		servers = append(servers, mcpclient.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers})
	}
	known := map[string]mcpclient.Capability{}
	if caps := sess.MCPCapabilities(); len(caps) > 0 {
		_ = json.Unmarshal(caps, &known)
	}
	m, errs := mcpclient.Connect(ctx, servers, mcpclient.Options{Logger: f.Logger(), Timeout: 30 * time.Second, Known: known, Stderr: f.IO.ErrOut})
	for _, err := range errs {
		fmt.Fprintf(f.IO.ErrOut, "warning: %v (continuing without it)\n", err)
	}
	return m
}
