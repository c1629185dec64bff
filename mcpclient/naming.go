package mcpclient

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
)

// ToolPrefix starts the name of every MCP tool offered to the LLM.
const ToolPrefix = "mcp__"

// maxToolName is the longest function name OpenAI-compatible APIs accept.
const maxToolName = 64

// QualifiedName is the name under which the tool of a server is offered to
// the LLM: "mcp__<server>__<tool>" when that is already made of
// [a-zA-Z0-9_-] and at most 64 characters. Otherwise the invalid characters
// become '_', the name is cut and a short hash of the original is appended.
// The hash keeps the name stable across processes whatever other tools the
// server lists, so a name stored in a checkpoint (a pending confirmation)
// still points at the same tool after a resume, and keeps "a.b" and "a_b"
// apart.
func QualifiedName(server, tool string) string {
	raw := ToolPrefix + server + "__" + tool
	if len(raw) <= maxToolName && validToolName(raw) {
		return raw
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:])[:8]
	clean := []byte(raw)
	for i, c := range clean {
		if !validToolByte(c) {
			clean[i] = '_'
		}
	}
	if len(clean) > maxToolName-len(suffix) {
		clean = clean[:maxToolName-len(suffix)]
	}
	return string(clean) + suffix
}

func validToolName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !validToolByte(s[i]) {
			return false
		}
	}
	return s != ""
}

func validToolByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// IdempotencyKey is the key sent with a START on a job-aware server: the same
// effect id, server and tool always give the same key, so a START retried
// after a crash finds the job the first one started instead of starting a
// second. The executor can compute it too, to reconcile an effect left
// "started" without an outcome.
func IdempotencyKey(effectID, server, tool string) string {
	sum := sha256.Sum256([]byte("upgrade-agent/mcp-job\x00" + effectID + "\x00" + server + "\x00" + tool))
	return hex.EncodeToString(sum[:16])
}

// IsMCPTool reports whether a tool or action name belongs to this package.
func IsMCPTool(name string) bool { return strings.HasPrefix(name, ToolPrefix) }

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
