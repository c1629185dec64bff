// Package upgrade is the typed client of UpGrade's REST API and the models
// it exchanges; the embedded simulator lives in upgrade/sim.
//
// The client hides the server's quirks from the rest of the program: state
// display names are folded into internal names, both segment wire shapes are
// read and the right one is written for the server's version, the deleted
// row is unwrapped from DELETE's array, a missing experiment is reported as
// not_found before a state change (the server would answer 500), and ids are
// minted for creates. Every failure is an *Error with a Category that the CLI
// maps to an exit code.
//
// It must not decide anything: no transition rules, no validation of
// experiment designs against context metadata, no confirmation. Those belong
// to pipeline/actions. It must never retry an admin write or a mark, and
// never put the admin token, the client secret or the client JWT in an
// error, a log record or any other text.
package upgrade
