package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
)

// UpGrade's error types (its SERVER_ERROR enumeration) that the simulator
// answers with.
const (
	typeIncorrectParam   = "Parameter not in the correct format"
	typeQueryFailed      = "Query Failed"
	typeUserNotDefined   = "Experiment user not defined"
	typeMissingUserID    = "Missing `User-Id` header"
	typeWorkingGroup     = "Working group is not a subset of user group"
	typeConditionMissing = "Condition not found"
	typeSharedDPInvalid  = "Experiment ID provided is invalid for shared Decision Point"
	typeUserNotFound     = "User ID not found"

	msgInvalidBody  = "Invalid body, check 'errors' property for more info."
	msgInvalidParam = "Invalid params, check 'errors' property for more info."
)

// maxBody bounds request bodies; bigger ones get 413 like body-parser's limit.
const maxBody = 4 << 20

// Error is an error answer of the simulator: the status and the fields of
// UpGrade's JSON error body. Detail says which rule failed; the real server
// does not tell, so it only travels in the X-Sim-Error-Detail header.
type Error struct {
	Status  int
	Name    string
	Message string
	Type    string
	Detail  string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("upgrade simulator: %d %s: %s", e.Status, e.Name, e.Message)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// apiError is the internal name; handlers build these.
type apiError = Error

func badBody(detail string) *apiError {
	return &apiError{Status: 400, Name: "BadRequestError", Message: msgInvalidBody, Type: typeIncorrectParam, Detail: detail}
}

func badParam(detail string) *apiError {
	return &apiError{Status: 400, Name: "BadRequestError", Message: msgInvalidParam, Type: typeIncorrectParam, Detail: detail}
}

func storageError(err error) *apiError {
	return &apiError{Status: 500, Name: "Error", Message: err.Error(), Type: typeQueryFailed}
}

// errorBody is UpGrade's error document.
type errorBody struct {
	Name      string          `json:"name,omitempty"` // absent on some 400s of the segment routes
	Message   string          `json:"message"`
	EndPoint  string          `json:"endPoint"`
	ErrorCode int             `json:"errorCode"`
	Type      string          `json:"type,omitempty"`
	Request   json.RawMessage `json:"request"`
}

// Handler serves the API under /api.
func (s *Sim) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// call is one request being answered.
type call struct {
	w    http.ResponseWriter
	r    *http.Request
	body []byte // the request body as parsed JSON text ("{}" when none)
}

func (s *Sim) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	defer func() {
		// No stack traces for anyone: a crash is a 500 like any other.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			c := &call{w: w, r: r, body: []byte("{}")}
			c.fail(&apiError{Status: 500, Name: "InternalError", Message: fmt.Sprintf("simulator internal error: %v", v)})
		}
	}()
	p := r.URL.Path
	if p != "/api" && !strings.HasPrefix(p, "/api/") {
		notFoundPage(w, r)
		return
	}
	rest := strings.Trim(strings.TrimPrefix(p, "/api"), "/")
	var segs []string
	if rest != "" {
		segs = strings.Split(rest, "/")
	}
	// Express matches routes case-insensitively.
	low := make([]string, len(segs))
	for i, sg := range segs {
		low[i] = strings.ToLower(sg)
	}
	c := &call{w: w, r: r, body: []byte("{}")}
	m := r.Method
	route := func(method string, admin bool, h func(*call)) {
		if admin && !s.authorized(c) {
			return
		}
		if method != http.MethodGet {
			if !c.readBody() {
				return
			}
		}
		h(c)
	}
	switch {
	case len(segs) == 0 && m == http.MethodGet:
		route(m, false, s.handleInfo)
	case len(segs) == 1 && low[0] == "experiments" && m == http.MethodGet:
		route(m, true, s.handleList)
	case len(segs) == 1 && low[0] == "experiments" && m == http.MethodPost:
		route(m, true, s.handleCreate)
	case len(segs) == 2 && low[0] == "experiments" && low[1] == "contextmetadata" && m == http.MethodGet:
		route(m, true, s.handleMetadata)
	case len(segs) == 2 && low[0] == "experiments" && low[1] == "names" && m == http.MethodGet:
		route(m, true, s.handleNames)
	case len(segs) == 2 && low[0] == "experiments" && low[1] == "paginated" && m == http.MethodPost:
		route(m, true, s.handlePaginated)
	case len(segs) == 2 && low[0] == "experiments" && low[1] == "state" && m == http.MethodPost:
		route(m, true, s.handleState)
	case len(segs) == 3 && low[0] == "experiments" && low[1] == "single" && m == http.MethodGet:
		route(m, true, func(c *call) { s.handleSingle(c, segs[2]) })
	case len(segs) == 2 && low[0] == "experiments" && m == http.MethodPut:
		route(m, true, func(c *call) { s.handleUpdate(c, segs[1]) })
	case len(segs) == 2 && low[0] == "experiments" && m == http.MethodDelete:
		route(m, true, func(c *call) { s.handleDelete(c, segs[1]) })
	case !s.legacy && len(segs) == 2 && low[0] == "experiments" && isListKind(low[1]) && m == http.MethodPost:
		route(m, true, func(c *call) { s.handleListAdd(c, listKind(low[1])) })
	case !s.legacy && len(segs) == 3 && low[0] == "experiments" && isListKind(low[1]) && m == http.MethodPut:
		route(m, true, func(c *call) { s.handleListUpdate(c, listKind(low[1]), segs[2]) })
	case !s.legacy && len(segs) == 3 && low[0] == "experiments" && isListKind(low[1]) && m == http.MethodDelete:
		route(m, true, func(c *call) { s.handleListDelete(c, listKind(low[1]), segs[2]) })
	case len(segs) == 3 && low[0] == "stats" && low[1] == "enrollment" && low[2] == "detail" && m == http.MethodPost:
		route(m, true, s.handleStats)
	case len(segs) == 2 && low[0] == "stats" && low[1] == "enrollment" && m == http.MethodPost:
		route(m, true, s.handleEnrollmentTotals)
	case len(segs) == 3 && low[0] == "stats" && low[1] == "enrollment" && low[2] == "date" && m == http.MethodPost:
		route(m, true, s.handleEnrollmentByDate)
	case len(segs) >= 1 && low[0] == "metric" && s.metricRoute(m, segs, low) != nil:
		route(m, true, s.metricRoute(m, segs, low))
	case len(segs) == 2 && low[0] == "query" && low[1] == "analyse" && m == http.MethodPost:
		route(m, true, s.handleAnalyse)
	case len(segs) == 2 && low[0] == "v6" && low[1] == "log" && m == http.MethodPost:
		route(m, false, s.handleLog)
	case len(segs) == 2 && low[0] == "v6" && low[1] == "init" && m == http.MethodPost:
		route(m, false, s.handleInit)
	case len(segs) == 2 && low[0] == "v6" && low[1] == "assign" && m == http.MethodPost:
		route(m, false, s.handleAssign)
	case len(segs) == 2 && low[0] == "v6" && low[1] == "mark" && m == http.MethodPost:
		route(m, false, s.handleMark)
	case len(segs) == 2 && low[0] == "v6" && low[1] == "reward" && m == http.MethodPost:
		route(m, false, s.rewardOff)
	case len(segs) == 3 && low[0] == "experiments" && low[1] == "mooclet-rewards" && m == http.MethodGet:
		route(m, true, moocletsOff)
	case s.portabilityRoute(m, segs, low) != nil:
		route(m, true, s.portabilityRoute(m, segs, low))
	case s.stratificationRoute(m, segs, low) != nil:
		route(m, true, s.stratificationRoute(m, segs, low))
	case s.importRoute(m, segs, low) != nil:
		route(m, true, s.importRoute(m, segs, low))
	default:
		if h, admin := s.catalogRoute(m, segs, low); h != nil {
			route(m, admin, h)
			return
		}
		notFoundPage(w, r)
	}
}

func isListKind(seg string) bool { return seg == "inclusionlist" || seg == "exclusionlist" }

func listKind(seg string) string {
	if seg == "inclusionlist" {
		return kindInclusion
	}
	return kindExclusion
}

// notFoundPage answers like Express does for a route it does not know.
func notFoundPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	_, _ = fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>Cannot %s %s</pre>\n</body>\n</html>\n",
		html.EscapeString(r.Method), html.EscapeString(r.URL.Path))
}

// authorized checks the admin bearer token when one is configured.
func (s *Sim) authorized(c *call) bool {
	if s.token == "" {
		return true
	}
	if c.r.Header.Get("Authorization") == "Bearer "+s.token {
		return true
	}
	c.fail(&apiError{Status: 401, Name: "AuthorizationRequiredError",
		Message: fmt.Sprintf("Authorization is required for request on %s %s", c.r.Method, c.r.URL.Path),
		Type:    typeUserNotFound})
	return false
}

// readBody reads and syntax-checks a JSON body. Like body-parser, a body that
// is not declared as JSON is ignored (it reaches validation as {}).
func (c *call) readBody() bool {
	b, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			c.fail(&apiError{Status: 413, Name: "PayloadTooLargeError", Message: "request entity too large"})
			return false
		}
		c.fail(&apiError{Status: 400, Name: "BadRequestError", Message: "request aborted: " + err.Error()})
		return false
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || !strings.Contains(strings.ToLower(c.r.Header.Get("Content-Type")), "json") {
		return true
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		msg := "Unexpected token in JSON"
		if err != nil {
			msg = err.Error()
		}
		c.fail(&apiError{Status: 400, Name: "SyntaxError", Message: msg})
		return false
	}
	c.body = b
	return true
}

// object decodes the body as a JSON object with numbers kept exact.
func (c *call) object() (map[string]any, *apiError) {
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badBody(err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badBody("the body is not a JSON object")
	}
	return m, nil
}

func (c *call) ok(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.fail(&apiError{Status: 500, Name: "Error", Message: "encoding the answer: " + err.Error()})
		return
	}
	c.raw(http.StatusOK, b)
}

func (c *call) raw(status int, b []byte) {
	h := c.w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	c.w.WriteHeader(status)
	_, _ = c.w.Write(b)
}

// fail writes UpGrade's JSON error document.
func (c *call) fail(e *apiError) {
	reqBody := json.RawMessage(c.body)
	if !json.Valid(reqBody) {
		reqBody = json.RawMessage("{}")
	}
	b, err := json.Marshal(errorBody{Name: e.Name, Message: e.Message, EndPoint: c.r.URL.RequestURI(),
		ErrorCode: e.Status, Type: e.Type, Request: reqBody})
	if err != nil {
		b = []byte(`{"name":"Error","message":"internal error","errorCode":500}`)
	}
	if e.Detail != "" {
		c.w.Header().Set("X-Sim-Error-Detail", headerSafe(e.Detail))
	}
	c.raw(e.Status, b)
}

// failErr writes any error from mutate or view.
func (c *call) failErr(err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		c.fail(ae)
		return
	}
	c.fail(storageError(err))
}

func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 500 {
		s = s[:500]
	}
	return s
}

func (s *Sim) handleInfo(c *call) {
	c.ok(map[string]string{
		"name":        "UpGrade (simulator)",
		"version":     s.version,
		"description": "In-process imitation of the UpGrade A/B testing backend, from upgrade-agent",
	})
}

func (s *Sim) handleMetadata(c *call) { c.raw(http.StatusOK, s.metaResp) }
