package pgtest

import (
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestStartAndConnect(t *testing.T) {
	c := Need(t)
	url, err := c.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	if url == "" {
		t.Fatal("no url")
	}
}
