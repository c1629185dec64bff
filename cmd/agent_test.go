package cmd

import (
	"bytes"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

func TestTurnViewStreamsOnATerminal(t *testing.T) {
	var out bytes.Buffer
	io := &IOStreams{Out: &out, ErrOut: &out, StdoutTTY: true}
	v := NewTurnView("text", io, time.Now)
	h := v.(*humanTurnView)
	if n := len(v.Options()); n != 2 {
		t.Fatalf("%d options on a terminal, want the reply and the stream", n)
	}
	h.stream("\nAbout to ")
	h.stream("delete it.")
	h.respond("About to delete it.\n\nDESTRUCTIVE: delete experiment X.\nReply yes to proceed or no to cancel.")
	want := "About to delete it.\n\nDESTRUCTIVE: delete experiment X.\nReply yes to proceed or no to cancel.\n"
	if out.String() != want {
		t.Fatalf("got %q", out.String())
	}
	// Printed early: the result does not print the reply again.
	if err := v.Result(&pipeline.Result{Response: "About to delete it.", Status: pipeline.StatusCompleted}, false); err != nil || out.String() != want {
		t.Fatalf("reply printed twice: %q, %v", out.String(), err)
	}

	out.Reset()
	io.StdoutTTY = false
	v = NewTurnView("text", io, time.Now)
	if n := len(v.Options()); n != 1 {
		t.Fatal("streaming when stdout is not a terminal")
	}
	v.(*humanTurnView).respond("Hello")
	if out.String() != "Hello\n" {
		t.Fatalf("got %q", out.String())
	}
}
