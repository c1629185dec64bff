package cmd

import (
	"bytes"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

func TestPrintReplyEarlyStreamsOnATerminal(t *testing.T) {
	var out bytes.Buffer
	f := NewFactory(&IOStreams{Out: &out, ErrOut: &out, StdoutTTY: true}, func(string) string { return "" })
	env := &turnEnv{agent: &pipeline.Agent{}}
	printed := printReplyEarly(f, env)
	env.agent.StreamText("\nAbout to ")
	env.agent.StreamText("delete it.")
	env.agent.OnResponse("About to delete it.\n\nDESTRUCTIVE: delete experiment X.\nReply yes to proceed or no to cancel.")
	want := "About to delete it.\n\nDESTRUCTIVE: delete experiment X.\nReply yes to proceed or no to cancel.\n"
	if out.String() != want || !*printed {
		t.Fatalf("got %q", out.String())
	}

	out.Reset()
	f.IO.StdoutTTY = false
	env = &turnEnv{agent: &pipeline.Agent{}}
	printReplyEarly(f, env)
	if env.agent.StreamText != nil {
		t.Fatal("streaming when stdout is not a terminal")
	}
	env.agent.OnResponse("Hello")
	if out.String() != "Hello\n" {
		t.Fatalf("got %q", out.String())
	}
}
