// Package quality holds the project's cross-cutting tests of spec/quality.md:
// fault injection against the LLM and UpGrade, the secrets test, fuzz
// targets of parsers whose packages do not fuzz them themselves, and
// whole-process checks. It drives the real CLI in process (cmd.Run) or the
// pipeline directly, with scripted LLM servers and simulators on loopback.
//
// It holds no production code and must not be imported. Timed figures
// belong to `make bench` (cmd/benchtable), not here: these tests
// assert exit codes, messages, counts and files.
package quality
