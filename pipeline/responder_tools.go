package pipeline

import (
	"context"
)

// responderTools are read-only accessors of the state. The turn report in the
// responder's prompt usually makes them unnecessary.
func responderTools() *toolSet {
	return newToolSet(
		lookupTool("get_context_metadata"),
		lookupTool("get_experiment_names"),
		lookupTool("get_all_experiments"),
		newTool("get_all_gathered_info", "Everything gathered in this session (details, enrollment, terms, schemas).", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.mu.Lock()
				defer t.mu.Unlock()
				return t.st.GatheredInfo, nil
			}),
		newTool("get_execution_log", "Actions executed in this session, oldest first.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.mu.Lock()
				defer t.mu.Unlock()
				return map[string]any{"execution_log": t.st.ExecutionLog, "older_entries_dropped": t.st.LogDropped}, nil
			}),
		newTool("get_errors", "Errors of this turn.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.mu.Lock()
				defer t.mu.Unlock()
				return map[string]any{"errors": t.st.Errors}, nil
			}),
		newTool("get_action_status", "The pending action, its params, missing params and confirmation state.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.mu.Lock()
				defer t.mu.Unlock()
				d, p := t.sess.draft, t.sess.pending
				status := map[string]any{"action_needed": d.name, "action_params": d.params, "missing_params": d.missing,
					"needs_confirmation": p != nil && p.NeedsHuman, "user_confirmed": t.st.UserConfirmed}
				if p != nil {
					status["confirmation_message"] = p.Message
				}
				return status, nil
			}),
		newTool("get_conversation_history", "Earlier exchanges of this session (most recent last).", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.mu.Lock()
				defer t.mu.Unlock()
				h := t.st.ConversationHistory
				if len(h) > 20 {
					h = h[len(h)-20:]
				}
				return map[string]any{"history": h, "older_exchanges": t.st.HistoryDropped + len(t.st.ConversationHistory) - len(h)}, nil
			}),
	)
}
