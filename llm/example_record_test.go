package llm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

// Recording a cassette needs no live endpoint: the scripted server is an
// OpenAI-compatible one. docs/llm.md shows this function's body.
func ExampleFromSpec_recordAgainstTheScriptedServer() {
	dir, _ := os.MkdirTemp("", "cassettes")
	defer os.RemoveAll(dir)

	srv := llmtest.NewServer(nil)
	defer srv.Close()
	srv.Enqueue(llmtest.TextReply("Math Hints is enrolling."))

	// The folder "new/" does not exist yet: record: makes it before the first call.
	cassette := filepath.Join(dir, "new", "calls.json")
	client, closer, err := llm.FromSpec("record:"+cassette, llm.Options{BaseURL: srv.URL(), Model: "gpt-4o-mini"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := client.Chat(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Is Math Hints running?"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Content)
	if err := closer.Close(); err != nil { // writes the cassette
		fmt.Println(err)
		return
	}

	// The cassette now answers the same request with no server at all.
	srv.Close()
	replay, _, err := llm.FromSpec("replay:"+cassette, llm.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err = replay.Chat(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Is Math Hints running?"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Content)
	// Output:
	// Math Hints is enrolling.
	// Math Hints is enrolling.
}
