package sim

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestFileProbe(t *testing.T) {
	for _, workers := range []int{1, 16} {
		ts := startSim(t, Options{Seed: 1, DataFile: filepath.Join(t.TempDir(), "d.json")})
		e := ts.create(expBody("F"))
		ts.setState(e.ID, "enrolling")
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < 1000; i += workers {
					u := fmt.Sprintf("u%04d", i)
					post(ts, "/v6/init", u, map[string]any{}, nil)
					post(ts, "/v6/assign", u, map[string]any{"context": ctx}, nil)
					post(ts, "/v6/mark", u, map[string]any{"data": map[string]any{"site": site, "target": target}, "status": "condition applied"}, nil)
				}
			}(w)
		}
		wg.Wait()
		t.Logf("workers %d: 3000 calls in %v", workers, time.Since(start))
	}
}
