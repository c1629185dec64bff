package mcpclient_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// runRawServer is a hand-written stdio MCP server for what the SDK's server
// never does: it answers initialize and tools/list (one tool, "work"), and
// a tools/call as behaviour says:
//   - exit: writes to stderr and exits 4 without answering;
//   - huge: answers with a line larger than the client accepts;
//   - invalid: answers with a line that is not JSON;
//   - silent: never answers (the client's context must end the call);
//   - chatty: first sends a response to an id nobody asked for, an error
//     with a null id, a notification, a ping request and a sampling request, and answers the
//     call with what the client replied to those two.
func runRawServer(behaviour string) int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = out.Write(append(b, '\n'))
		_ = out.Flush()
	}
	result := func(id json.RawMessage, res any) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
	}
	var (
		callID  json.RawMessage
		replies = map[string]string{}
	)
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(in.Bytes(), &msg); err != nil {
			fmt.Fprintf(os.Stderr, "raw: bad message %q\n", in.Text())
			return 2
		}
		switch msg.Method {
		case "initialize":
			result(msg.ID, map[string]any{
				"protocolVersion": "2025-11-25",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "raw", "version": "1"},
			})
		case "tools/list":
			result(msg.ID, map[string]any{"tools": []any{
				map[string]any{"name": "work", "inputSchema": map[string]any{"type": "object"}},
			}})
		case "tools/call":
			switch behaviour {
			case "exit":
				fmt.Fprintln(os.Stderr, "raw: out of memory")
				return 4
			case "huge":
				_, _ = fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}`+"\n",
					msg.ID, strings.Repeat("x", 65<<20))
				_ = out.Flush()
			case "invalid":
				_, _ = out.WriteString(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{` + "\n")
				_ = out.Flush()
			case "silent":
			case "chatty":
				callID = msg.ID
				result(json.RawMessage(`424242`), map[string]any{"content": []any{}})
				send(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "parse error"}})
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "working"}})
				send(map[string]any{"jsonrpc": "2.0", "id": "s-1", "method": "ping"})
				send(map[string]any{"jsonrpc": "2.0", "id": "s-2", "method": "sampling/createMessage",
					"params": map[string]any{"messages": []any{}, "maxTokens": 10}})
			}
		case "":
			// The client's answer to one of our requests.
			var id string
			_ = json.Unmarshal(msg.ID, &id)
			if msg.Error != nil {
				replies[id] = fmt.Sprintf("error %d", msg.Error.Code)
			} else {
				replies[id] = "result " + string(msg.Result)
			}
			if len(replies) == 2 && callID != nil {
				text := fmt.Sprintf("ping: %s; sampling: %s", replies["s-1"], replies["s-2"])
				result(callID, map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
				callID, replies = nil, map[string]string{}
			}
		}
	}
	return 0
}
