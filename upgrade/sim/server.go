package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is a simulator listening on a TCP address.
type Server struct {
	sim  *Sim
	srv  *http.Server
	ln   net.Listener
	url  string
	done chan struct{}

	// fresh holds connections accepted but not yet used for a request.
	// Shutdown counts them as busy for five seconds; a client's spare
	// keep-alive dial would hold every Close up that long.
	mu      sync.Mutex
	fresh   map[net.Conn]struct{}
	closing bool

	closeOnce sync.Once
	closeErr  error
}

// Start builds a simulator and serves it on 127.0.0.1 at a free port.
func Start(opts Options) (*Server, error) { return StartAddr("127.0.0.1:0", opts) }

// StartAddr builds a simulator and serves it on addr (host:port; port 0
// picks a free one). `sim serve --addr` uses it.
func StartAddr(addr string, opts Options) (*Server, error) {
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("simulator: listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	sv := &Server{sim: s, srv: srv, ln: ln, url: baseURL(ln.Addr()), done: make(chan struct{}),
		fresh: map[net.Conn]struct{}{}}
	srv.ConnState = sv.track
	go func() {
		defer close(sv.done)
		_ = srv.Serve(ln)
	}()
	return sv, nil
}

// baseURL names the API root; an unspecified listen address is reached
// through loopback.
func baseURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String() + "/api"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/api"
}

func (s *Server) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != http.StateNew {
		delete(s.fresh, c)
		return
	}
	if s.closing {
		_ = c.Close()
		return
	}
	s.fresh[c] = struct{}{}
}

// URL is the API base, "http://127.0.0.1:PORT/api".
func (s *Server) URL() string { return s.url }

// Addr is the address listened on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Sim is the simulator served.
func (s *Server) Sim() *Sim { return s.sim }

// Close stops accepting requests and waits (up to five seconds) for those in
// flight. Every answered write is already in the data file, so nothing is
// left to flush.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		for c := range s.fresh {
			_ = c.Close()
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := s.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = s.srv.Close()
		}
		<-s.done
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.closeErr = fmt.Errorf("simulator: close: %w", err)
		}
	})
	return s.closeErr
}
