// Package jschema is the project's JSON Schema code: For writes the schema
// of a Go type (tool arguments, action params), and Compile/Validate check
// a JSON value against a schema document (an MCP tool's inputSchema, a
// structured-output schema).
//
// It replaces github.com/google/jsonschema-go in the binary, whose package
// init built schemas by reflection on every start. For writes, byte for
// byte, what jsonschema.For followed by the agent's tidying wrote (the
// tests compare them); the validator covers the subset of JSON Schema
// (2020-12 and draft-07) listed in Compile.
//
// It must not import anything outside the standard library, and must do
// no work at package init.
package jschema
