package mcpclient

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
)

// ServerConfig is one entry of the config key mcp_servers: either a stdio
// command or a streamable-HTTP URL.
type ServerConfig struct {
	// Name identifies the server in tool names, logs, errors and the
	// checkpoint's "mcp" field: letters, digits, '-' and '_', no "__".
	Name string `json:"name" yaml:"name"`
	// Command and Args start a stdio server.
	Command string   `json:"command,omitempty" yaml:"command,omitempty"`
	Args    []string `json:"args,omitempty" yaml:"args,omitempty"`
	// Env is added to a small inherited environment (see docs/mcp.md); values
	// may refer to this process's variables as ${NAME}.
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// URL is a streamable-HTTP endpoint.
	URL string `json:"url,omitempty" yaml:"url,omitempty"`
	// Headers are sent with every HTTP request; values may use ${NAME}.
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`
	// Transport, when set, is used instead of Command/URL: for tests and for
	// embedding a server in-process (mcptest.FromSDK adapts the SDK's
	// in-memory transport).
	Transport Transport `json:"-" yaml:"-"`
}

// Options tune Connect.
type Options struct {
	// Logger receives debug and warning records; nil discards them.
	Logger *slog.Logger
	// Timeout bounds starting, initializing and listing the tools of each
	// server; 0 means 30s.
	Timeout time.Duration
	// Known holds the capabilities restored from a checkpoint, by server
	// name. See Connect for how they combine with what servers advertise.
	Known map[string]Capability
	// ClientVersion is sent as clientInfo.version; "" means "dev".
	ClientVersion string
	// TaskTTL is the retention asked of a server for a task-augmented call;
	// 0 means 24h, long enough for a job that waits on a later resume.
	TaskTTL time.Duration
	// Stderr, when set, also receives what stdio servers write to stderr.
	Stderr io.Writer
}

const (
	defaultTimeout = 30 * time.Second
	defaultTaskTTL = 24 * time.Hour
)

var serverNameRE = lazyre.Of(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Validate checks one server entry on its own; Connect also rejects
// duplicate names.
func (c ServerConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("name is empty")
	case !serverNameRE.Get().MatchString(c.Name):
		return fmt.Errorf("name %q: use letters, digits, '-' and '_' only, starting with a letter or digit", c.Name)
	case strings.Contains(c.Name, "__"):
		return fmt.Errorf("name %q: must not contain \"__\" (it separates server and tool in tool names)", c.Name)
	}
	if c.Transport != nil {
		return nil
	}
	switch {
	case c.Command == "" && c.URL == "":
		return errors.New("set either command (stdio) or url (streamable HTTP)")
	case c.Command != "" && c.URL != "":
		return errors.New("set command or url, not both")
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil {
			return fmt.Errorf("url: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q: need an http or https URL with a host", c.URL)
		}
		if len(c.Args) > 0 || len(c.Env) > 0 {
			return errors.New("args and env apply to a command, not to a url")
		}
	case c.Command != "":
		if len(c.Headers) > 0 {
			return errors.New("headers apply to a url, not to a command")
		}
	}
	return nil
}

// expandVars replaces ${NAME} with the value of the environment variable
// NAME, so that a config file can point at a secret instead of holding it.
// A lone '$' is left alone.
func expandVars(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i+2:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(os.Getenv(s[i+2 : i+2+j]))
		s = s[i+2+j+1:]
	}
}

// inheritedEnv lists the variables a stdio server gets from this process.
// Everything else, notably OPENAI_API_KEY and UPGRADE_API_TOKEN, must be
// passed explicitly through ServerConfig.Env.
var inheritedEnv = []string{
	"HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "TMPDIR", "TZ",
	"LANG", "LC_ALL", "LC_CTYPE",
	"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
	"SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "PROGRAMFILES",
}

func serverEnv(extra map[string]string) []string {
	env := make([]string, 0, len(inheritedEnv)+len(extra))
	for _, k := range inheritedEnv {
		if _, set := extra[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range sortedKeys(extra) {
		env = append(env, k+"="+expandVars(extra[k]))
	}
	return env
}
