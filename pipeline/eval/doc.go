// Package eval measures a model on goal cases (`upgrade-agent eval`): each
// trial of a case plays its turns through the scenario runner on a fresh
// embedded simulator, with the person's answers to confirmations, and is
// graded by the backend after the last turn, the forbidden events and the
// budget. It computes pass@1, pass^k and pass@k, tokens, latency and cost,
// and writes the reports and per-trial transcripts.
//
// It must not parse case files (pipeline/scenario does, with the scenario
// decoder) nor know how a model is reached (the caller hands it a client
// per trial).
package eval
