package quality

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// fault is an answer the fake UpGrade gives instead of the simulator's.
type fault struct {
	method      string // "" = any
	path        string // prefix of the path after /api ("" = any)
	status      int
	contentType string
	body        string
	times       int // answers to fault; 0 = every one
}

// fakeUpgrade is the simulator behind a switch that replaces answers with
// faults, so that a session can fail on one turn and work on the next.
type fakeUpgrade struct {
	srv *httptest.Server
	sim *sim.Sim

	mu     sync.Mutex
	faults []*fault
	hits   int // faulted answers so far
}

func newFakeUpgrade(t *testing.T, opts sim.Options) *fakeUpgrade {
	t.Helper()
	s, err := sim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeUpgrade{sim: s}
	h := s.Handler()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ft := f.match(r); ft != nil {
			if ft.contentType != "" {
				w.Header().Set("Content-Type", ft.contentType)
			}
			w.WriteHeader(ft.status)
			_, _ = w.Write([]byte(ft.body))
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the API base to give the CLI.
func (f *fakeUpgrade) URL() string { return f.srv.URL + "/api" }

func (f *fakeUpgrade) match(r *http.Request) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/api")
	for i, ft := range f.faults {
		if (ft.method == "" || ft.method == r.Method) && strings.HasPrefix(path, ft.path) {
			f.hits++
			if ft.times > 0 {
				ft.times--
				if ft.times == 0 {
					f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
				}
			}
			return ft
		}
	}
	return nil
}

// set replaces the faults; none heals the server.
func (f *fakeUpgrade) set(faults ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
	for i := range faults {
		f.faults = append(f.faults, &faults[i])
	}
}
