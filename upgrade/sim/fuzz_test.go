package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(`{"a": {"CONDITIONS": ["x"], "GROUP_TYPES": [], "EXP_IDS": ["t"], "EXP_POINTS": ["s"]}}`))
	f.Add([]byte(`{"contextMetadata": {"a": {}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMetadata(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseMetadata(b)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", b, err)
		}
		if diff := cmp.Diff(m, again); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

func FuzzDataFile(f *testing.F) {
	s, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.InitUser("u", upgrade.InitRequest{Group: map[string][]string{"classId": {"c1"}}}); err != nil {
		f.Fatal(err)
	}
	s.mu.Lock()
	seed, err := s.encodeLocked()
	s.mu.Unlock()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"format":1,"rng":"","idRng":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = s.installLocked(data) // must not panic
	})
}

// FuzzHandler throws arbitrary bodies at every route: the answer is always
// a well-formed UpGrade answer, never a crash.
func FuzzHandler(f *testing.F) {
	valid, _ := json.Marshal(expBody("Fuzz"))
	f.Add(uint8(0), "u1", valid)
	f.Add(uint8(1), "u1", []byte(`{"group":{"classId":["c1"]},"workingGroup":{"classId":"c1"}}`))
	f.Add(uint8(2), "u1", []byte(`{"context":"assign-prog"}`))
	f.Add(uint8(3), "u1", []byte(`{"data":{"site":"SelectSection","target":"absolute_value_plot_equality","assignedCondition":{"conditionCode":"control"}},"status":"condition applied"}`))
	f.Add(uint8(4), "", []byte(`{"skip":0,"take":5,"searchParams":{"key":"all","string":"x"},"sortParams":{"key":"name","sortAs":"ASC"}}`))
	f.Add(uint8(5), "", []byte(`{"experimentId":"3f0b6a55-1c7e-4c1e-9a53-2b8f0f7d9c11","state":"running"}`))
	f.Add(uint8(6), "", []byte(`{"experimentId":"x"}`))
	s, err := New(Options{Seed: 1})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	routes := []string{"/api/experiments", "/api/v6/init", "/api/v6/assign", "/api/v6/mark",
		"/api/experiments/paginated", "/api/experiments/state", "/api/stats/enrollment/detail"}
	f.Fuzz(func(t *testing.T, route uint8, user string, body []byte) {
		req := httptest.NewRequest("POST", routes[int(route)%len(routes)], bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if user != "" && !strings.ContainsAny(user, "\r\n\x00") {
			req.Header.Set("User-Id", user)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("200 with invalid JSON: %s", rec.Body)
			}
			return
		}
		var e errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.ErrorCode != rec.Code {
			t.Fatalf("status %d with body %s", rec.Code, rec.Body)
		}
		if e.Name == "InternalError" {
			t.Fatalf("crash: %s", e.Message)
		}
	})
}
