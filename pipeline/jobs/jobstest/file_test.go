package jobstest_test

import (
	"testing"

	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs/jobstest"
)

// TestFileStoreConformance runs the suite against job records in a state dir.
func TestFileStoreConformance(t *testing.T) {
	jobstest.Run(t, jobstest.Harness{
		Fresh: func(t *testing.T) string { return t.TempDir() },
		Open: func(t *testing.T, dir string) *jobs.Store {
			s, err := jobs.OpenStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}
