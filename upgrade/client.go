package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/lazy"
	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/internal/retry"
	"github.com/upgrade-agent/upgrade-agent/internal/tracing"
)

// Config says how to reach one UpGrade server.
type Config struct {
	// BaseURL is the API root, e.g. http://127.0.0.1:3030/api (http or
	// https, host required; a trailing slash is dropped).
	BaseURL string
	// Token is the admin bearer token; "" sends no Authorization header,
	// because a server with login disabled still rejects a bad token.
	Token string
	// Timeout bounds each request (each attempt); 0 = 30s.
	Timeout time.Duration
	// ClientAPIKey and ClientAPISecret switch on the HS256 JWT that servers
	// with client authentication want on /v6 routes. Set both or neither.
	ClientAPIKey, ClientAPISecret string
	// HTTPClient replaces the process-wide keep-alive client.
	HTTPClient *http.Client
	// MaxRetries is how many times an idempotent call is repeated after its
	// first attempt; 0 = 4, negative = never.
	MaxRetries int
	// Logger receives one Debug record per request; nil = discard. The
	// token is never logged.
	Logger *slog.Logger

	// MaxRetryTime bounds the time spent across all attempts of one call,
	// waits included; 0 = 1 minute.
	MaxRetryTime time.Duration
	// Sleep waits between retries; nil = a real timer. Tests inject a
	// recorder so retry schedules are checked without waiting.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for the retry budget and Retry-After dates; nil =
	// time.Now.
	Now func() time.Time
}

const (
	defaultTimeout = 30 * time.Second
	// maxAnswerBytes guards memory against a runaway answer; the largest
	// legitimate one (every experiment in full) is far below it.
	maxAnswerBytes = 64 << 20
	userAgent      = "upgrade-agent"
)

// sharedHTTPClient is the one keep-alive client of the process. The balance
// job keeps 16 or more requests in flight against one host, so the idle pool
// per host is far larger than net/http's default of 2, which would otherwise
// close and reopen connections on every burst.
var sharedHTTPClient = &lazy.Value[*http.Client]{New: newSharedHTTPClient}

func newSharedHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: t}
}

// Client speaks UpGrade's REST API. It is safe for concurrent use.
type Client struct {
	base         string // no trailing slash
	baseRedacted string // for messages: user:password hidden
	token        string
	clientAuth   string // "Bearer <jwt>" or ""
	secrets      []string
	hc           *http.Client // shared, or the one Config gave
	traced       *http.Client // hc with the tracing transport: what requests go through
	timing       retry.Settings

	fetchVersion sync.Mutex // one GET / at a time; later callers reuse its answer
	mu           sync.Mutex
	version      string
	versionKnown bool
}

// New checks cfg and returns a client. It sends no request.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		return nil, configError("the UpGrade base URL is empty (set UPGRADE_API_URL or --upgrade-url, e.g. http://localhost:3030/api)")
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, configError(fmt.Sprintf("invalid UpGrade base URL: %v", err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, configError(fmt.Sprintf("invalid UpGrade base URL %q: scheme must be http or https", u.Redacted()))
	case u.Host == "":
		return nil, configError(fmt.Sprintf("invalid UpGrade base URL %q: no host", u.Redacted()))
	case u.RawQuery != "" || u.Fragment != "":
		return nil, configError(fmt.Sprintf("invalid UpGrade base URL %q: it must not carry a query or fragment", u.Redacted()))
	}
	if cfg.Timeout < 0 {
		return nil, configError(fmt.Sprintf("invalid UpGrade timeout %s: must not be negative", cfg.Timeout))
	}
	if (cfg.ClientAPIKey == "") != (cfg.ClientAPISecret == "") {
		return nil, configError("client_api_key and client_api_secret must be set together")
	}
	c := &Client{
		base:         base,
		baseRedacted: u.Redacted(),
		token:        cfg.Token,
		hc:           cfg.HTTPClient,
		timing: retry.Settings{Timeout: cfg.Timeout, MaxRetries: cfg.MaxRetries, MaxRetryTime: cfg.MaxRetryTime,
			Sleep: cfg.Sleep, Now: cfg.Now, Log: cfg.Logger}.WithDefaults(retry.Settings{
			Timeout: defaultTimeout, MaxRetries: defaultMaxRetries, MaxRetryTime: defaultMaxRetryTime}),
	}
	if c.hc == nil {
		c.hc = sharedHTTPClient.Get()
	}
	// Calls made under a traced context become HTTP client spans;
	// untraced ones go straight through.
	traced := *c.hc
	traced.Transport = tracing.Transport(traced.Transport)
	c.traced = &traced
	if cfg.ClientAPIKey != "" {
		jwt := clientJWT(cfg.ClientAPIKey, cfg.ClientAPISecret)
		c.clientAuth = "Bearer " + jwt
		c.secrets = append(c.secrets, jwt, cfg.ClientAPISecret)
	}
	if cfg.Token != "" {
		c.secrets = append(c.secrets, cfg.Token)
	}
	return c, nil
}

func configError(msg string) error {
	return &Error{Category: CategoryValidation, Message: msg}
}

// BaseURL is the API root the client talks to, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// ShapeForVersion says which segment wire shape a server of that version
// reads: 6.3 and later take arrays, older ones a single object. An empty or
// unreadable version is taken to be recent.
func ShapeForVersion(version string) SegmentShape {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return SegmentsArray
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(leadingDigits(parts[1]))
	if err1 != nil || err2 != nil {
		return SegmentsArray
	}
	if major < 6 || major == 6 && minor < 3 {
		return SegmentsObject
	}
	return SegmentsArray
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// Health asks the server for its name and version (GET on the base URL) and
// remembers the version for Version.
func (c *Client) Health(ctx context.Context) (*ServerInfo, error) {
	r := request{method: http.MethodGet, path: "", idempotent: true}
	var info ServerInfo
	if err := c.call(ctx, r, &info); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.version, c.versionKnown = info.Version, true
	c.mu.Unlock()
	return &info, nil
}

// Version is the server's version, e.g. "6.5.0", asked once per Client. A
// failed lookup is not remembered, so the next call asks again.
func (c *Client) Version(ctx context.Context) (string, error) {
	if v, ok := c.cachedVersion(); ok {
		return v, nil
	}
	c.fetchVersion.Lock()
	defer c.fetchVersion.Unlock()
	if v, ok := c.cachedVersion(); ok {
		return v, nil
	}
	info, err := c.Health(ctx)
	if err != nil {
		return "", err
	}
	return info.Version, nil
}

func (c *Client) cachedVersion() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version, c.versionKnown
}

// segmentShape picks the wire shape for experiment bodies. A server whose
// root answers 404 (a proxy that only forwards /experiments...) gets the
// current shape rather than a failed write.
func (c *Client) segmentShape(ctx context.Context) (SegmentShape, error) {
	v, err := c.Version(ctx)
	if err != nil {
		if CategoryOf(err) == CategoryNotFound {
			c.timing.Log.WarnContext(ctx, "UpGrade version unknown; writing 6.5 segment shape", "cause", err.Error())
			return SegmentsArray, nil
		}
		return SegmentsArray, err
	}
	return ShapeForVersion(v), nil
}

// ContextMetadata returns the app contexts the server knows.
func (c *Client) ContextMetadata(ctx context.Context) (ContextMetadata, error) {
	var out struct {
		ContextMetadata ContextMetadata `json:"contextMetadata"`
	}
	r := request{method: http.MethodGet, path: "/experiments/contextMetaData", idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	if out.ContextMetadata == nil {
		return ContextMetadata{}, nil
	}
	return out.ContextMetadata, nil
}

// ExperimentNames lists the id and name of every experiment.
func (c *Client) ExperimentNames(ctx context.Context) ([]ExperimentName, error) {
	out := []ExperimentName{}
	r := request{method: http.MethodGet, path: "/experiments/names", idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Experiments returns every experiment in full.
func (c *Client) Experiments(ctx context.Context) ([]Experiment, error) {
	out := []Experiment{}
	r := request{method: http.MethodGet, path: "/experiments", idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ExperimentsPage returns one page of experiments. It is a POST that only
// reads, so it is retried like a GET.
func (c *Client) ExperimentsPage(ctx context.Context, req PageRequest) (*Page, error) {
	var out Page
	r := request{method: http.MethodPost, path: "/experiments/paginated", body: req, idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	if out.Nodes == nil {
		out.Nodes = []Experiment{}
	}
	return &out, nil
}

// Experiment returns one experiment by id.
func (c *Client) Experiment(ctx context.Context, id string) (*Experiment, error) {
	if strings.TrimSpace(id) == "" {
		return nil, c.localError(http.MethodGet, "/experiments/single/", CategoryValidation, "experiment id is empty")
	}
	r := request{method: http.MethodGet, path: "/experiments/single/" + url.PathEscape(id), idempotent: true, experimentID: id, emptyMeansNull: true}
	var out *Experiment
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	if out == nil {
		// Older servers answered an unknown id with 200 and no body.
		return nil, c.localError(r.method, r.path, CategoryNotFound, fmt.Sprintf("experiment %s not found", id))
	}
	return out, nil
}

// CreateExperiment creates e and returns the server's copy, whose condition
// and decision point ids are the ones to use from then on. e itself is not
// modified.
//
// The experiment id is always dropped: UpGrade treats a POST carrying an
// existing id as an upsert and would silently overwrite that experiment.
// Conditions and decision points without ids get fresh ones, because the
// server insists on ids being present even though it replaces them.
// Never retried: a repeated create makes a twin.
func (c *Client) CreateExperiment(ctx context.Context, e *Experiment) (*Experiment, error) {
	const path = "/experiments"
	if e == nil {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, "create experiment: no experiment given")
	}
	body := withFreshIDs(e)
	body.ID = ""
	if id, ok := ctx.Value(createIDKey{}).(string); ok {
		body.ID = id
	}
	if body.State == "" {
		body.State = StateInactive
	}
	if body.Tags == nil {
		body.Tags = []string{}
	}
	return c.writeExperiment(ctx, http.MethodPost, path, body)
}

type createIDKey struct{}

// WithCreateID makes CreateExperiment send id as the experiment id. UpGrade
// upserts a POST that carries an id, so a create repeated with the same id
// (after a crash left its outcome unknown) updates the one experiment instead
// of making a twin. The caller must derive id from something unique to that
// one create, never reuse an existing experiment's id.
func WithCreateID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, createIDKey{}, id)
}

// CreateIDOf is the id WithCreateID put in ctx ("" when none): for fakes of
// the client.
func CreateIDOf(ctx context.Context) string {
	id, _ := ctx.Value(createIDKey{}).(string)
	return id
}

// UpdateExperiment replaces the experiment e.ID with e (the server has no
// partial update) and returns the server's copy. Existing condition and
// decision point ids must be kept by the caller; new ones without an id get
// one. Never retried.
func (c *Client) UpdateExperiment(ctx context.Context, e *Experiment) (*Experiment, error) {
	if e == nil || strings.TrimSpace(e.ID) == "" {
		return nil, c.localError(http.MethodPut, "/experiments/", CategoryValidation, "update experiment: the experiment id is empty")
	}
	body := withFreshIDs(e)
	return c.writeExperiment(ctx, http.MethodPut, "/experiments/"+url.PathEscape(e.ID), body)
}

func (c *Client) writeExperiment(ctx context.Context, method, path string, e *Experiment) (*Experiment, error) {
	shape, err := c.segmentShape(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := e.requestBody(shape)
	if err != nil {
		return nil, c.localError(method, path, CategoryValidation, fmt.Sprintf("encoding experiment: %v", err))
	}
	var out Experiment
	if err := c.call(ctx, request{method: method, path: path, body: json.RawMessage(raw), experimentID: e.ID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// withFreshIDs copies e, giving every condition and decision point that has
// no id a new one. The caller's experiment and slices are left untouched.
func withFreshIDs(e *Experiment) *Experiment {
	cp := *e
	cp.Conditions = append([]Condition(nil), e.Conditions...)
	cp.Partitions = append([]DecisionPoint(nil), e.Partitions...)
	for i := range cp.Conditions {
		if cp.Conditions[i].ID == "" {
			cp.Conditions[i].ID = NewID()
		}
	}
	for i := range cp.Partitions {
		if cp.Partitions[i].ID == "" {
			cp.Partitions[i].ID = NewID()
		}
	}
	if cp.Conditions == nil {
		cp.Conditions = []Condition{}
	}
	if cp.Partitions == nil {
		cp.Partitions = []DecisionPoint{}
	}
	return &cp
}

// SetState moves experiment id to state s (internal or display name) and
// returns the updated experiment. It checks that the experiment exists
// first, because the server answers 500 rather than 404 for an unknown id.
// Transition rules are the caller's business: the server enforces none.
// Never retried.
func (c *Client) SetState(ctx context.Context, id string, s State) (*Experiment, error) {
	const path = "/experiments/state"
	st := NormalizeState(string(s))
	if !st.Valid() {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, fmt.Sprintf("unknown experiment state %q", string(s)))
	}
	if strings.TrimSpace(id) == "" {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, "experiment id is empty")
	}
	if _, err := c.Experiment(ctx, id); err != nil {
		return nil, err
	}
	var out Experiment
	r := request{method: http.MethodPost, path: path, body: StateChange{ExperimentID: id, State: st}, experimentID: id}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteExperiment deletes experiment id and returns the deleted row. The
// server answers an array holding that row; a plain object is accepted too.
// Never retried.
func (c *Client) DeleteExperiment(ctx context.Context, id string) (*Experiment, error) {
	if strings.TrimSpace(id) == "" {
		return nil, c.localError(http.MethodDelete, "/experiments/", CategoryValidation, "experiment id is empty")
	}
	r := request{method: http.MethodDelete, path: "/experiments/" + url.PathEscape(id), experimentID: id}
	data, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0 || string(trimmed) == "null":
		return &Experiment{ID: id}, nil
	case trimmed[0] == '[':
		var rows []Experiment
		if err := c.decode(r, data, &rows); err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, c.localError(r.method, r.path, CategoryNotFound, fmt.Sprintf("experiment %s not found (nothing was deleted)", id))
		}
		return &rows[0], nil
	default:
		var row Experiment
		if err := c.decode(r, data, &row); err != nil {
			return nil, err
		}
		return &row, nil
	}
}

// EnrollmentStats returns enrollment per condition and decision point. It is
// a POST that only reads, so it is retried like a GET.
func (c *Client) EnrollmentStats(ctx context.Context, id string) (*EnrollmentStats, error) {
	const path = "/stats/enrollment/detail"
	if strings.TrimSpace(id) == "" {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, "experiment id is empty")
	}
	var out EnrollmentStats
	r := request{method: http.MethodPost, path: path, body: map[string]string{"experimentId": id}, idempotent: true, experimentID: id}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Init registers user userID (and their groups) with the server; a client
// must do it before Assign. Fields left nil keep their stored values.
// Repeating it changes nothing, so it is retried.
func (c *Client) Init(ctx context.Context, userID string, req InitRequest) (*InitResponse, error) {
	r := request{method: http.MethodPost, path: "/v6/init", body: req, userID: userID, idempotent: true}
	if err := c.checkUser(r); err != nil {
		return nil, err
	}
	var out InitResponse
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Assign returns the conditions user userID gets in app context appContext, one
// entry per decision point; empty when no experiment is running there. The
// server keeps assignments stable, so it is retried.
func (c *Client) Assign(ctx context.Context, userID, appContext string) ([]Assignment, error) {
	r := request{method: http.MethodPost, path: "/v6/assign", body: map[string]string{"context": appContext}, userID: userID, idempotent: true}
	if err := c.checkUser(r); err != nil {
		return nil, err
	}
	out := []Assignment{}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	if out == nil { // a JSON null
		out = []Assignment{}
	}
	return out, nil
}

// Mark records that user userID reached a decision point. Never retried: a
// mark may exclude the user, and a repeated one is recorded twice.
func (c *Client) Mark(ctx context.Context, userID string, req MarkRequest) (*MarkResponse, error) {
	r := request{method: http.MethodPost, path: "/v6/mark", body: req, userID: userID}
	if err := c.checkUser(r); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Data.Site) == "" {
		return nil, c.localError(r.method, r.path, CategoryValidation, "mark: data.site is empty")
	}
	var out MarkResponse
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) checkUser(r request) error {
	if strings.TrimSpace(r.userID) == "" {
		return c.localError(r.method, r.path, CategoryValidation, "user id is empty (the User-Id header is required on "+r.path+")")
	}
	return nil
}

// request describes one call; the transport code below is shared by all.
type request struct {
	method string
	path   string // appended to the base URL; "" = the base URL itself
	body   any    // JSON-encoded unless already json.RawMessage; nil = no body
	// userID marks a client route (/v6): sent as User-Id, with the client JWT.
	userID string
	// idempotent calls may be retried; writes never are.
	idempotent bool
	// experimentID, when set, lets a 400 be explained as a malformed id.
	experimentID string
	// emptyMeansNull: a 2xx answer with no body is a JSON null (older
	// servers answer an unknown experiment id so). Everywhere else an
	// empty answer is broken, never an empty list.
	emptyMeansNull bool
}

func (c *Client) localError(method, path string, cat Category, msg string) *Error {
	return &Error{Category: cat, Method: method, URL: c.baseRedacted + path, Message: c.scrub(msg)}
}

// scrub removes every configured secret from text that may reach a person,
// such as a server message echoing the header it rejected.
func (c *Client) scrub(s string) string {
	return redact.String(s, c.secrets...)
}

// call sends r and decodes a successful answer into out.
func (c *Client) call(ctx context.Context, r request, out any) error {
	data, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	return c.decode(r, data, out)
}

func (c *Client) decode(r request, data []byte, out any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		if !r.emptyMeansNull {
			return &Error{Category: CategoryAPI, Method: r.method, URL: c.baseRedacted + r.path,
				Message: fmt.Sprintf("UpGrade %s %s answered with an empty body where data was due", r.method, c.baseRedacted+r.path)}
		}
		data = []byte("null")
	}
	if err := json.Unmarshal(data, out); err != nil {
		msg := fmt.Sprintf("UpGrade %s %s: unreadable answer: %v", r.method, c.baseRedacted+r.path, err)
		if isHTML("", strings.TrimSpace(string(data))) {
			msg = fmt.Sprintf("UpGrade %s %s answered with an HTML page instead of JSON: check that the base URL ends in /api", r.method, c.baseRedacted+r.path)
		}
		return &Error{Category: CategoryAPI, Method: r.method, URL: c.baseRedacted + r.path, Message: c.scrub(msg), Err: err}
	}
	return nil
}

// send runs r with the retry policy and returns the body of a 2xx answer.
func (c *Client) send(ctx context.Context, r request) ([]byte, error) {
	var payload []byte
	switch b := r.body.(type) {
	case nil:
	case json.RawMessage:
		payload = b
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return nil, c.localError(r.method, r.path, CategoryValidation, fmt.Sprintf("encoding request body: %v", err))
		}
	}
	return c.withRetries(ctx, r.idempotent, func(n int) attemptResult {
		return c.attempt(ctx, r, payload, n)
	})
}

// attempt sends one request, bounded by the per-request timeout.
func (c *Client) attempt(ctx context.Context, r request, payload []byte, n int) attemptResult {
	fullURL := c.base + r.path
	shownURL := c.baseRedacted + r.path
	actx, cancel := context.WithTimeout(ctx, c.timing.Timeout)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, r.method, fullURL, body)
	if err != nil {
		return attemptResult{err: &Error{Category: CategoryUnknown, Method: r.method, URL: shownURL,
			Message: c.scrub(fmt.Sprintf("building request %s %s: %v", r.method, shownURL, err)), Err: err}}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	auth := "none"
	switch {
	case r.userID != "":
		req.Header.Set("User-Id", r.userID)
		if c.clientAuth != "" {
			req.Header.Set("Authorization", c.clientAuth)
			auth = "bearer " + redact.Mark
		}
	case r.path != "" && c.token != "":
		// The root (GET /) is public; only admin routes carry the token.
		req.Header.Set("Authorization", "Bearer "+c.token)
		auth = "bearer " + redact.Mark
	}

	start := time.Now()
	resp, err := c.traced.Do(req)
	if err != nil {
		c.logRequest(ctx, r, 0, time.Since(start), n, auth)
		return attemptResult{err: c.transportError(ctx, actx, r, shownURL, err), retryable: ctx.Err() == nil}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	c.logRequest(ctx, r, resp.StatusCode, time.Since(start), n, auth)
	if err != nil {
		return attemptResult{err: c.transportError(ctx, actx, r, shownURL, err), retryable: ctx.Err() == nil}
	}
	if len(data) > maxAnswerBytes {
		return attemptResult{err: &Error{Category: CategoryAPI, Status: resp.StatusCode, Method: r.method, URL: shownURL,
			Message: fmt.Sprintf("answer larger than %d MiB", maxAnswerBytes>>20)}}
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return attemptResult{body: data}
	}
	e := &Error{
		Category: categoryForStatus(resp.StatusCode),
		Status:   resp.StatusCode,
		Method:   r.method,
		URL:      shownURL,
		Message:  c.scrub(errorMessage(resp.StatusCode, resp.Header.Get("Content-Type"), data)),
	}
	if e.Category == CategoryValidation && r.experimentID != "" && !IsUUID(r.experimentID) {
		e.Message = fmt.Sprintf("%q is not a valid experiment id (UpGrade ids are UUIDs)", c.scrub(r.experimentID))
	}
	if e.Category == CategoryNotFound && e.Message == "" && r.experimentID != "" {
		e.Message = fmt.Sprintf("experiment %s not found", c.scrub(r.experimentID))
	}
	res := attemptResult{err: e, retryable: retryableStatus(resp.StatusCode)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.retryAfter = retry.After(resp.Header, c.timing.Now(), maxRetryAfter)
	}
	return res
}

// transportError explains a failure where no full answer arrived.
func (c *Client) transportError(ctx, actx context.Context, r request, shownURL string, err error) *Error {
	e := &Error{Category: CategoryAPI, Method: r.method, URL: shownURL, Err: err}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err // its text repeats the URL, which may carry a password
	}
	switch {
	case ctx.Err() != nil:
		e.Message = fmt.Sprintf("UpGrade %s %s: %v", r.method, shownURL, context.Cause(ctx))
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		e.Message = fmt.Sprintf("UpGrade at %s did not answer %s %s within %s", c.baseRedacted, r.method, r.pathOrRoot(), c.timing.Timeout)
	default:
		e.Message = fmt.Sprintf("cannot reach UpGrade at %s: %v", c.baseRedacted, cause)
	}
	e.Message = c.scrub(e.Message)
	return e
}

func (r request) pathOrRoot() string {
	if r.path == "" {
		return "/"
	}
	return r.path
}

func (c *Client) logRequest(ctx context.Context, r request, status int, d time.Duration, attempt int, auth string) {
	c.timing.Log.DebugContext(ctx, "upgrade http",
		"method", r.method, "path", r.pathOrRoot(), "status", status,
		"duration", d, "attempt", attempt, "authorization", auth)
}
