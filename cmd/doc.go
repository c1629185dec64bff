// Package cmd is the command line of upgrade-agent: the cobra command tree,
// the global settings (flag > environment > config file > default), the
// Factory that hands commands their clients, and the views that render
// results (the exit code of an outcome comes from exitcode.Code).
//
// Each command is a thin constructor, NewCmdX(f, runF), over a run function
// that takes an options struct and no cobra types, so tests call it
// directly. NewRootCmd lists every command explicitly.
//
// It must not hold agent logic (that lives in pipeline/), must not call
// os.Exit or print errors itself (Run does both, once), and must never print
// or log the UpGrade token or the LLM API key.
package cmd
