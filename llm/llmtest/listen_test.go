package llmtest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"sync/atomic"
	"testing"
)

// server is what the tests below need of httpServer and of the
// httptest.Server it replaces; each test runs against both, so a
// difference in behaviour shows as a test that passes for one only.
type server interface {
	URL() string
	Close()
}

type ours struct{ *httpServer }

func (s ours) URL() string { return s.url }

type theirs struct{ *httptest.Server }

func (s theirs) URL() string { return s.Server.URL }

var servers = []struct {
	name  string
	start func(http.Handler) server
}{
	{"llmtest", func(h http.Handler) server { return ours{startHTTP(h)} }},
	{"httptest", func(h http.Handler) server { return theirs{httptest.NewServer(h)} }},
}

func TestHTTPURLShape(t *testing.T) {
	for _, tc := range servers {
		s := tc.start(http.NotFoundHandler())
		if !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+$`).MatchString(s.URL()) {
			t.Errorf("%s: URL %q", tc.name, s.URL())
		}
		s.Close()
		s.Close() // a second Close is harmless
	}
}

// Close waits for a request under way to finish, and refuses new
// connections meanwhile.
func TestHTTPCloseWaitsForHandlers(t *testing.T) {
	for _, tc := range servers {
		t.Run(tc.name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			var finished atomic.Bool
			s := tc.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				<-release
				_, _ = io.WriteString(w, "done")
				finished.Store(true)
			}))
			got := make(chan string, 1)
			go func() {
				resp, err := http.Get(s.URL())
				if err != nil {
					got <- err.Error()
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				got <- string(b)
			}()
			<-entered
			closed := make(chan struct{})
			go func() { s.Close(); close(closed) }()
			// Close has begun once the port refuses connections.
			addr := s.URL()[len("http://"):]
			for {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					break
				}
				c.Close()
				runtime.Gosched()
			}
			select {
			case <-closed:
				t.Fatal("Close returned while a handler was running")
			default:
			}
			close(release)
			<-closed
			if !finished.Load() {
				t.Error("Close returned before the handler finished")
			}
			if b := <-got; b != "done" {
				t.Errorf("the request under way got %q", b)
			}
		})
	}
}

// Close closes the connections a client keeps idle between requests
// (without that it would wait for them forever) and those hijacked from
// the server are the handler's own.
func TestHTTPCloseClosesIdleAndHijacked(t *testing.T) {
	for _, tc := range servers {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hijack" {
					resetConnection(w)
					return
				}
				_, _ = io.WriteString(w, "ok")
			}))
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			if _, err := client.Get(s.URL() + "/hijack"); err == nil {
				t.Error("a reset connection gave an answer")
			}
			resp, err := client.Get(s.URL())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close() // the connection goes back to tr's pool, idle
			s.Close()
			if _, err := client.Get(s.URL()); err == nil {
				t.Error("a request after Close was answered")
			}
		})
	}
}
