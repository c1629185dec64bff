package main

import (
	"context"
	"testing"
)

// The tracing row is measured: both sides play their turns and the row
// carries a figure (its mark is the machine's business, not the test's).
func TestTracingFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("plays 400 turns")
	}
	rows, err := tracingFigures(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].measured == "" {
		t.Fatalf("rows = %+v", rows)
	}
	t.Logf("%+v", rows)
}
