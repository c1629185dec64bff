package llmtest

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// httpServer serves a handler on a loopback port with the semantics of
// httptest.Server that Server relies on: URL is "http://127.0.0.1:port",
// and Close stops accepting, closes idle connections and waits for the
// requests under way. It does not import net/http/httptest, which brings
// net/http/internal/testcert (a certificate parsed at package init) into
// every binary that links it; the binary links this package for
// `scenario run`.
type httpServer struct {
	url string
	ln  net.Listener
	srv *http.Server

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]http.ConnState
	wg     sync.WaitGroup // the Serve goroutine and every open connection
}

// startHTTP listens on 127.0.0.1 (or [::1] where there is no IPv4
// loopback) and serves h. Like httptest.NewServer it panics when it
// cannot listen: there is no test to report to.
func startHTTP(h http.Handler) *httpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("llmtest: failed to listen on a port: %v", err))
		}
	}
	s := &httpServer{url: "http://" + ln.Addr().String(), ln: ln, conns: map[net.Conn]http.ConnState{}}
	s.srv = &http.Server{Handler: h, ConnState: s.connState}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln) // returns when Close closes the listener
	}()
	return s
}

// connState tracks every connection so that Close can close the idle
// ones and wait for the others.
func (s *httpServer) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.wg.Add(1)
		s.conns[c] = st
		if s.closed {
			// A dial that lost the race with Close: it will never be used.
			c.Close()
		}
	case http.StateActive:
		if _, ok := s.conns[c]; ok {
			s.conns[c] = st
		}
	case http.StateIdle:
		if _, ok := s.conns[c]; ok {
			s.conns[c] = st
		}
		if s.closed {
			c.Close()
		}
	case http.StateHijacked, http.StateClosed:
		if _, ok := s.conns[c]; ok {
			delete(s.conns, c)
			s.wg.Done()
		}
	}
}

// Close stops accepting connections, closes the idle and never-used ones,
// ends keep-alive so that active ones close after their request, and waits
// for them. It is safe to call more than once.
func (s *httpServer) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.ln.Close()
		s.srv.SetKeepAlivesEnabled(false)
		for c, st := range s.conns {
			if st == http.StateIdle || st == http.StateNew {
				c.Close()
			}
		}
	}
	s.mu.Unlock()
	// As httptest does: clients on the default transport would otherwise
	// keep idle connections to a port nobody serves any more.
	if t, ok := http.DefaultTransport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	s.wg.Wait()
}
