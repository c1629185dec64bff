// Package scenario parses and runs YAML scenarios (spec/scenarios.md): whole
// conversations played turn by turn against a backend, with the model's
// replies scripted in the file, served from a cassette, or live.
//
// What it is for: Parse decodes a scenario strictly (every unknown key or
// wrong type is an error naming file:line:col): the format is declared once,
// as the structs of decode.go that yaml.v3 fills with KnownFields, and their
// values are converted to the Scenario's types there; Run gives each scenario a
// fresh state dir, a fresh embedded simulator (or the configured UpGrade),
// a scripted OpenAI-compatible server reached through the real client, runs
// every step through pipeline.Agent exactly as `ask` and `resume` would,
// checks the expectations, and compares a normalised transcript with
// golden/<name>.txt. The CLI (`scenario run|check`) and `go test ./...`
// both drive it.
//
// What it must not do: it must not reimplement any part of the agent (it
// builds the agent with pipeline.New and only calls Agent.Ask and
// Agent.Resume), decide exit codes itself (exitcode.Code does), print (callers render Reports), or reach any
// network address but loopback unless a scenario says `backend: url` or an
// `llm:` other than script.
package scenario
