package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
)

// Config is the content of one config file. A zero field means "not set in
// the file"; fields where zero is a meaningful setting are pointers.
type Config struct {
	StateDir        string        `yaml:"state_dir"`
	UpgradeURL      string        `yaml:"upgrade_url"`
	UpgradeToken    string        `yaml:"upgrade_token"`
	UpgradeTimeout  time.Duration `yaml:"upgrade_timeout"`
	ClientAPIKey    string        `yaml:"client_api_key"`
	ClientAPISecret string        `yaml:"client_api_secret"`

	LLM             string        `yaml:"llm"`
	LLMBaseURL      string        `yaml:"llm_base_url"`
	Model           string        `yaml:"model"`
	AzureAPIVersion string        `yaml:"azure_api_version"`
	LLMTimeout      time.Duration `yaml:"llm_timeout"`

	Output  string `yaml:"output"`
	NoColor bool   `yaml:"no_color"`

	Confirm string `yaml:"confirm"`
	// ReplyWording says who words the reply that shows a confirmation and
	// the reply after a confirmed action, a denial or a finished job: go
	// (rendered from the plan or the result) or llm.
	ReplyWording          string         `yaml:"reply_wording"`
	WaitJobs              *time.Duration `yaml:"wait_jobs"` // 0 means "suspend at once", so nil is "unset"
	OutputSchema          string         `yaml:"output_schema"`
	ConversationalOutputs bool           `yaml:"conversational_outputs"`
	MaxAutoReplies        *int           `yaml:"max_auto_replies"`
	// MaxConsecutiveAutoReplies ends a turn at once when the agent has
	// answered that many turns in a row without a human decision (a yes or
	// no to a confirmation); 0 or unset: no limit.
	MaxConsecutiveAutoReplies *int        `yaml:"max_consecutive_auto_replies"`
	TerminationWords          []string    `yaml:"termination_words"`
	Replies                   []Reply     `yaml:"replies"`
	MCPServers                []MCPServer `yaml:"mcp_servers"`

	// Store is where sessions, jobs and the audit trail live: "" the state
	// dir, a postgres:// URL the team's database (docs/teams.md).
	Store string `yaml:"store"`
	// Actor labels the audit trail's entries; default USER@hostname.
	Actor string `yaml:"actor"`
	// ApprovalTTL is how long a confirmation may be approved; nil = 168h,
	// 0 = never expires.
	ApprovalTTL *time.Duration `yaml:"approval_ttl"`

	// Trace is the file OpenTelemetry spans are written to as JSON lines;
	// TraceContent also records message and tool contents (docs/tracing.md).
	Trace        string `yaml:"trace"`
	TraceContent bool   `yaml:"trace_content"`

	ContextMetadata string `yaml:"context_metadata"` // JSON file for the embedded simulator
	SimSeed         *int64 `yaml:"sim_seed"`

	// File is the path the config was read from ("" when there was none).
	File string `yaml:"-"`
}

// Reply is a canned answer: when a message matches Pattern, Reply is used
// without asking the LLM.
type Reply struct {
	Pattern string `yaml:"pattern"`
	Reply   string `yaml:"reply"`

	// Regexp is Pattern compiled; set by Load.
	Regexp *regexp.Regexp `yaml:"-"`
}

// MCPServer is one Model Context Protocol server: either a local command
// (stdio) or a URL (streamable HTTP).
type MCPServer struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Trusted lets the server's tool annotations relax confirmation (a
	// destructiveHint false under --confirm destructive). Annotations of
	// any other server are claims, not facts.
	Trusted bool `yaml:"trusted"`
}

// Accepted values of the enumerated settings.
var (
	Outputs      = []string{"text", "json", "yaml", "wide", "raw"}
	ConfirmModes = []string{"always", "destructive", "never"}
	Wordings     = []string{"go", "llm"}
)

// Error is one problem with a config file. Line is 0 when the problem is not
// tied to a line (a missing file); Key is the dotted path of the setting
// ("replies[1].pattern"), "" when the problem is the file as a whole.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config ")
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// maxProblems bounds how many problems one Load reports; a file that is
// wrong everywhere is better fixed a screenful at a time.
const maxProblems = 10

// limits bound the config file: the defaults of internal/safeyaml (1 MiB,
// 262,144 values once aliases are expanded, aliases nested at most 10
// deep). A config file is a few hundred bytes; within these bounds loading
// ends in about a second at worst, so it takes no context.
var limits = safeyaml.Limits{}

// Load reads and validates the config file at path. When explicit is false
// (the default location, not named by the user) a missing file is not an
// error and yields an empty Config; a named file must exist. It must be a
// regular file (a FIFO is refused without blocking) of at most 1 MiB.
func Load(path string, explicit bool) (*Config, error) {
	data, err := safeyaml.ReadFile(path, limits)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !explicit {
			return &Config{}, nil
		}
		msg := "cannot read the file"
		switch {
		case errors.Is(err, fs.ErrNotExist):
			msg = "file not found"
		case errors.Is(err, safefile.ErrTooLarge), errors.Is(err, safefile.ErrNotRegular):
			msg = errors.Unwrap(err).Error()
		}
		return nil, &Error{File: path, Msg: msg, Err: err}
	}
	return Parse(data, path)
}

// Parse validates data as the content of the config file named file; file
// is used in messages and as the base of relative paths.
func Parse(data []byte, file string) (*Config, error) {
	cfg := &Config{File: file}
	p := &parser{file: file}

	// The tree is checked (size, aliases) before anything walks it or
	// decodes it into cfg.
	doc, err := safeyaml.Decode(data, file, limits)
	if err != nil {
		var le *safeyaml.Error
		if errors.As(err, &le) {
			p.add(le.Line, "", le.Msg)
			return nil, p.err()
		}
		p.yamlError(err)
		return nil, p.err()
	}
	if doc.Kind == 0 {
		return cfg, nil // empty file or only comments
	}
	p.root = doc

	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		p.yamlError(err)
		return nil, p.err()
	}
	cfg.File = file

	p.validate(cfg)
	if err := p.err(); err != nil {
		return nil, err
	}
	resolvePaths(cfg, filepath.Dir(file))
	return cfg, nil
}

// ValidateURL checks that raw is an absolute http or https URL with a host.
// The message never repeats a password the URL may carry.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL (want http://HOST[:PORT]/PATH)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q is not an http or https URL (want http://HOST[:PORT]/PATH)", u.Redacted())
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%q has no host (want http://HOST[:PORT]/PATH)", u.Redacted())
	}
	return nil
}

// LLMSpecKinds are the accepted forms of an LLM spec.
var LLMSpecKinds = []string{"openai", "script:FILE", "replay:FILE", "record:FILE"}

// ValidateLLMSpec checks spec against the forms in LLMSpecKinds.
func ValidateLLMSpec(spec string) error {
	if spec == "openai" {
		return nil
	}
	kind, file, ok := strings.Cut(spec, ":")
	switch {
	case ok && (kind == "script" || kind == "replay" || kind == "record"):
		if strings.TrimSpace(file) == "" {
			return fmt.Errorf("%q names no file (want %s:FILE)", spec, kind)
		}
		return nil
	}
	return fmt.Errorf("%q is not one of %s", spec, strings.Join(LLMSpecKinds, ", "))
}

// SplitLLMSpec returns the kind and file of a valid spec ("openai", "").
func SplitLLMSpec(spec string) (kind, file string) {
	kind, file, _ = strings.Cut(spec, ":")
	return kind, file
}

// resolvePaths makes the file paths of cfg independent of the working
// directory by anchoring relative ones at the config file's folder.
func resolvePaths(cfg *Config, dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	cfg.StateDir = abs(cfg.StateDir)
	cfg.OutputSchema = abs(cfg.OutputSchema)
	cfg.ContextMetadata = abs(cfg.ContextMetadata)
	cfg.Trace = abs(cfg.Trace)
	if kind, file := SplitLLMSpec(cfg.LLM); kind != "openai" && file != "" {
		cfg.LLM = kind + ":" + abs(file)
	}
	for i := range cfg.MCPServers {
		// A bare command name is looked up on PATH; only a path with a
		// folder part ("./bin/server") is relative to the config file.
		c := cfg.MCPServers[i].Command
		if strings.ContainsRune(c, '/') || strings.ContainsRune(c, filepath.Separator) {
			cfg.MCPServers[i].Command = abs(c)
		}
	}
}

// parser collects the problems of one file.
type parser struct {
	file     string
	root     *yaml.Node
	problems []*Error
}

func (p *parser) add(line int, key, msg string) {
	if len(p.problems) < maxProblems {
		p.problems = append(p.problems, &Error{File: p.file, Line: line, Key: key, Msg: msg})
	}
}

// err returns nil, the single *Error, or several joined in line order.
func (p *parser) err() error {
	switch len(p.problems) {
	case 0:
		return nil
	case 1:
		return p.problems[0]
	}
	sort.SliceStable(p.problems, func(i, j int) bool { return p.problems[i].Line < p.problems[j].Line })
	errs := make([]error, len(p.problems))
	for i, e := range p.problems {
		errs[i] = e
	}
	return errors.Join(errs...)
}

var (
	syntaxLine = lazyre.Of(`^yaml: line (\d+): (.*)$`)
	typeLine   = lazyre.Of(`^line (\d+): (.*)$`)
	unknownKey = lazyre.Of(`^field (.+) not found in type \S+$`)
	badValue   = lazyre.Of("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
)

// yamlError turns a yaml.v3 error into problems with lines and keys.
func (p *parser) yamlError(err error) {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, e := range te.Errors {
			m := typeLine.Get().FindStringSubmatch(e)
			if m == nil {
				p.add(0, "", e)
				continue
			}
			line, _ := strconv.Atoi(m[1])
			p.typeProblem(line, m[2])
		}
		return
	}
	msg := err.Error()
	if m := syntaxLine.Get().FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.add(line, "", "invalid YAML: "+m[2])
		return
	}
	p.add(0, "", "invalid YAML: "+strings.TrimPrefix(msg, "yaml: "))
}

func (p *parser) typeProblem(line int, msg string) {
	if m := unknownKey.Get().FindStringSubmatch(msg); m != nil {
		p.add(line, p.keyNamed(line, m[1]), fmt.Sprintf("unknown key %q", m[1]))
		return
	}
	key := p.keyAt(line)
	if m := badValue.Get().FindStringSubmatch(msg); m != nil {
		tag, value, into := m[1], m[2], m[3]
		if into == "time.Duration" {
			p.add(line, key, fmt.Sprintf("invalid duration %s (use Go syntax such as 30s, 2m or 1h30m)", quoteShort(value, tag)))
			return
		}
		p.add(line, key, fmt.Sprintf("expected %s, got %s", describeType(into), quoteShort(value, tag)))
		return
	}
	p.add(line, key, msg)
}

func quoteShort(value, tag string) string {
	if value == "" {
		switch tag {
		case "seq":
			return "a list"
		case "map":
			return "a mapping"
		}
		return "!!" + tag
	}
	if len(value) > 40 {
		value = value[:40] + "..."
	}
	return strconv.Quote(value)
}

func describeType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "config."):
		return "a mapping"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return goType
}

// keyNamed finds the dotted path of the mapping key called name on line.
func (p *parser) keyNamed(line int, name string) string {
	var found string
	walk(p.root, "", func(path string, key, _ *yaml.Node) {
		if key != nil && key.Line == line && key.Value == name && found == "" {
			found = path
		}
	})
	if found == "" {
		return name
	}
	return found
}

// keyAt finds the dotted path of the setting on line: the deepest mapping
// key there, else the outermost value starting there (a block list item).
func (p *parser) keyAt(line int) string {
	var byKey, byValue string
	walk(p.root, "", func(path string, key, value *yaml.Node) {
		switch {
		case key != nil && key.Line == line:
			byKey = path // later visits are deeper or further right
		case value.Line == line && !strings.HasPrefix(path, "[") && byValue == "":
			byValue = path // the outermost: "- [a]" is the item, not "a"
		}
	})
	if byKey != "" {
		return byKey
	}
	return byValue
}

// walk visits every node below n in document order with its dotted path.
// key is the mapping key node of value (nil for sequence items and the root).
func walk(n *yaml.Node, path string, visit func(path string, key, value *yaml.Node)) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walk(c, path, visit)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := k.Value
			if path != "" {
				sub = path + "." + k.Value
			}
			visit(sub, k, v)
			walk(v, sub, visit)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			sub := fmt.Sprintf("%s[%d]", path, i)
			visit(sub, nil, c)
			walk(c, sub, visit)
		}
	}
}

// lineOf is the line of the setting at the dotted path, 0 when absent.
func (p *parser) lineOf(path string) int {
	line := 0
	walk(p.root, "", func(sub string, key, value *yaml.Node) {
		if sub == path && line == 0 {
			if key != nil {
				line = key.Line
			} else {
				line = value.Line
			}
		}
	})
	return line
}

func (p *parser) bad(key, format string, args ...any) {
	p.add(p.lineOf(key), key, fmt.Sprintf(format, args...))
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// validate checks the values the YAML types alone cannot.
func (p *parser) validate(c *Config) {
	for _, u := range []struct{ key, value string }{{"upgrade_url", c.UpgradeURL}, {"llm_base_url", c.LLMBaseURL}} {
		if u.value != "" {
			if err := ValidateURL(u.value); err != nil {
				p.bad(u.key, "%v", err)
			}
		}
	}
	switch {
	case c.ClientAPIKey != "" && c.ClientAPISecret == "":
		p.bad("client_api_key", "needs client_api_secret as well")
	case c.ClientAPISecret != "" && c.ClientAPIKey == "":
		p.bad("client_api_secret", "needs client_api_key as well")
	}
	if c.UpgradeTimeout < 0 {
		p.bad("upgrade_timeout", "must not be negative")
	}
	if c.Store != "" && !ValidStore(c.Store) {
		// The value is not echoed: it may hold a password.
		p.bad("store", "must be empty (files in the state dir) or a postgres:// or postgresql:// URL")
	}
	if c.ApprovalTTL != nil && *c.ApprovalTTL < 0 {
		p.bad("approval_ttl", "must not be negative (0 never expires)")
	}
	if c.LLMTimeout < 0 {
		p.bad("llm_timeout", "must not be negative")
	}
	if c.WaitJobs != nil && *c.WaitJobs < 0 {
		p.bad("wait_jobs", "must not be negative")
	}
	if c.LLM != "" {
		if err := ValidateLLMSpec(c.LLM); err != nil {
			p.bad("llm", "%v", err)
		}
	}
	if c.Output != "" && !oneOf(c.Output, Outputs) {
		p.bad("output", "%q is not one of %s", c.Output, strings.Join(Outputs, ", "))
	}
	if c.Confirm != "" && !oneOf(c.Confirm, ConfirmModes) {
		p.bad("confirm", "%q is not one of %s", c.Confirm, strings.Join(ConfirmModes, ", "))
	}
	if c.ReplyWording != "" && !oneOf(c.ReplyWording, Wordings) {
		p.bad("reply_wording", "%q is not one of %s", c.ReplyWording, strings.Join(Wordings, ", "))
	}
	if c.MaxAutoReplies != nil && *c.MaxAutoReplies < 0 {
		p.bad("max_auto_replies", "must not be negative")
	}
	if c.MaxConsecutiveAutoReplies != nil && *c.MaxConsecutiveAutoReplies < 0 {
		p.bad("max_consecutive_auto_replies", "must not be negative")
	}
	for i, w := range c.TerminationWords {
		if strings.TrimSpace(w) == "" {
			p.bad(fmt.Sprintf("termination_words[%d]", i), "must not be empty")
		}
	}
	for i := range c.Replies {
		r := &c.Replies[i]
		key := fmt.Sprintf("replies[%d]", i)
		if r.Pattern == "" {
			p.bad(key, "pattern is required")
		} else if re, err := regexp.Compile(r.Pattern); err != nil {
			p.bad(key+".pattern", "invalid regular expression: %v", err)
		} else {
			r.Regexp = re
		}
		if r.Reply == "" {
			p.bad(key, "reply is required")
		}
	}
	seen := map[string]bool{}
	for i, s := range c.MCPServers {
		key := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case s.Name == "":
			p.bad(key, "name is required")
		case seen[s.Name]:
			p.bad(key+".name", "duplicate server name %q", s.Name)
		}
		seen[s.Name] = true
		switch {
		case s.Command == "" && s.URL == "":
			p.bad(key, "needs either command (a local server) or url (a remote one)")
		case s.Command != "" && s.URL != "":
			p.bad(key, "has both command and url; keep one")
		case s.URL != "":
			if err := ValidateURL(s.URL); err != nil {
				p.bad(key+".url", "%v", err)
			}
		}
	}
}

// ValidStore reports whether s can be the store setting: a postgres:// or
// postgresql:// URL.
func ValidStore(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql")
}
