package upgrade

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkAssignParallel measures the client's own cost per call (shared
// keep-alive transport, JSON both ways) against a loopback server that
// answers instantly, with the balance job's kind of parallelism.
func BenchmarkAssignParallel(b *testing.B) {
	body := []byte(`[{"site":"SelectSection","target":"absolute_value_plot_equality","experimentType":"Simple",` +
		`"assignedCondition":[{"id":"c1","conditionCode":"control","payload":null,"experimentId":"e1"}]}]`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL + "/api"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Assign(b.Context(), "student-1", "assign-prog"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkDecodeExperiment is the cost of reading one full 6.5 experiment.
func BenchmarkDecodeExperiment(b *testing.B) {
	data := []byte(readTestdata(b, "experiment-6.5.json"))
	b.ReportAllocs()
	for b.Loop() {
		var e Experiment
		if err := json.Unmarshal(data, &e); err != nil {
			b.Fatal(err)
		}
	}
}
