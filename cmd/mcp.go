package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// connectMCP starts the MCP servers of the config for this run. A server
// that fails is reported on stderr and left out; the agent works on without
// it. The capabilities negotiated in earlier runs come from the session's
// checkpoint.
func connectMCP(ctx context.Context, f *Factory, env *turnEnv, sess *pipeline.Session) {
	cfg := f.opts().Config
	if cfg == nil || len(cfg.MCPServers) == 0 {
		return
	}
	var servers []mcpclient.ServerConfig
	for _, s := range cfg.MCPServers {
		servers = append(servers, mcpclient.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers})
	}
	known := map[string]mcpclient.Capability{}
	if len(sess.CP.MCP) > 0 {
		_ = json.Unmarshal(sess.CP.MCP, &known)
	}
	m, errs := mcpclient.Connect(ctx, servers, mcpclient.Options{Logger: f.Logger(), Timeout: 30 * time.Second, Known: known, Stderr: f.IO.ErrOut})
	for _, err := range errs {
		fmt.Fprintf(f.IO.ErrOut, "warning: %v (continuing without it)\n", err)
	}
	env.agent.MCP = m
	env.closers = append(env.closers, func() { _ = m.Close() })
}
