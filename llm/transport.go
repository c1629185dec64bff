package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// NodeHeader carries the name of the pipeline node making a call. The
// scripted server (llmtest) names the node in its failure messages; real
// providers ignore it.
const NodeHeader = "X-Upgrade-Agent-Node"

type ctxKey int

const (
	nodeKey ctxKey = iota
	attemptKey
)

// WithNode returns a context whose LLM calls are tagged with the node name.
func WithNode(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, nodeKey, node)
}

// nodeFrom is the node set by WithNode, or "".
func nodeFrom(ctx context.Context) string {
	s, _ := ctx.Value(nodeKey).(string)
	return s
}

// attempt is shared between one Chat attempt and the transport: the
// transport needs to know what to patch, and the retry loop needs the
// response status and headers, which go-openai's errors do not carry
// (Retry-After in particular).
type attempt struct {
	node     string
	zeroTemp bool // send "temperature": 0, which go-openai's omitempty drops

	status int         // set once a response arrived
	header http.Header // of that response
}

// transport adds what go-openai cannot express to every chat request.
type transport struct {
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, _ := req.Context().Value(attemptKey).(*attempt)
	if a == nil {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not modify the caller's request.
	r := req.Clone(req.Context())
	if a.node != "" {
		r.Header.Set(NodeHeader, a.node)
	}
	if a.zeroTemp && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading request body: %w", err)
		}
		body, err = withZeroTemperature(body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := t.base.RoundTrip(r)
	if resp != nil {
		a.status = resp.StatusCode
		a.header = resp.Header
	}
	return resp, err
}

// withZeroTemperature adds "temperature":0 to a JSON object unless it
// already has a temperature. go-openai's Temperature field is a float32 with
// omitempty, so a requested 0 vanishes from the wire and the provider uses
// its default (1 for OpenAI): deterministic calls would silently become
// random. Splicing the key after the opening brace keeps every other byte of
// the body as go-openai wrote it.
func withZeroTemperature(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	if _, ok := top["temperature"]; ok {
		return body, nil
	}
	i := bytes.IndexByte(body, '{')
	out := make([]byte, 0, len(body)+len(`"temperature":0,`))
	out = append(out, body[:i+1]...)
	out = append(out, `"temperature":0`...)
	if len(top) > 0 {
		out = append(out, ',')
	}
	out = append(out, body[i+1:]...)
	return out, nil
}
