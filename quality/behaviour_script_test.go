package quality

import (
	"fmt"
	"strings"
)

// Fragments of scripted model replies, in the YAML of llm/llmtest, from
// which the behaviour cases are built.

// analyze is the analyzer's classification of a request that needs the
// server.
const analyze = "- call: {analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: The request., reasoning: Needs the server.}}\n"

// respond is the responder's reply.
const respond = "- reply: Here is what I understood.\n"

// done is the responder after an execution: nothing, the reply is
// rendered in Go from the result (reply_wording go, the default).
const done = ""

// gather is the gatherer's reply choosing an action and setting its params
// (a YAML flow mapping) in one round.
func gather(action, params string) string {
	return fmt.Sprintf("- call:\n    set_action_needed: {action: %s, reasoning: The request.}\n    set_action_params: {action_params: %s}\n", action, params)
}

// parallel is one gatherer reply of parallel calls, each "tool: {args}".
func parallel(cs ...string) string {
	var b strings.Builder
	b.WriteString("- calls:\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "    - %s\n", c)
	}
	return b.String()
}

// rawCall is a reply with one call whose arguments are sent verbatim.
func rawCall(name, args string) string {
	return fmt.Sprintf("- raw_call: {name: %s, arguments: %s}\n", name, yamlQuote(args))
}

// yamlQuote quotes s as a YAML double-quoted scalar.
func yamlQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// analyzeAnswer is the analyzer reading an answer to a pending
// confirmation.
func analyzeAnswer(fields string) string {
	return fmt.Sprintf("- call: {analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: The answer., reasoning: An answer to the confirmation., %s}}\n", fields)
}

// request is the first turn of an action case: the analyzer, one gatherer
// round setting everything, the responder; it ends on a confirmation.
func request(say, action, params string) turnStep {
	return turnStep{say: say, llm: analyze + gather(action, params) + respond,
		want: turnWant{status: "awaiting_confirmation", confirm: action, calls: 3}}
}

// yes is the person's yes: read in Go, the action shown runs and the
// reply is rendered from its result, with no LLM call.
func yes(action string) turnStep {
	return turnStep{say: "yes", llm: done, want: turnWant{ran: action}}
}

// expect sets what a step must show and returns it.
func (s turnStep) expect(fn func(w *turnWant)) turnStep {
	fn(&s.want)
	return s
}
