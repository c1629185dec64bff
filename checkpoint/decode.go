package checkpoint

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/canonjson"
	"github.com/upgrade-agent/upgrade-agent/internal/lazy"
)

// migrations[N] rewrites a document of format_version N into the shape of version N+1,
// in place; Load applies them in a chain up to FormatVersion and sets format_version
// after each step. A migration sees the document's top-level members as raw JSON, so
// what it does not touch (the state, above all) keeps its bytes, and it can move
// numbers without rounding. A slice, not a map: the compiler lays it out, where a map
// literal is built at package init.
var migrations = []func(doc map[string]json.RawMessage) error{
	1: migrateV1,
}

// migrationFrom is the migration of format_version v, nil when there is none.
func migrationFrom(v int) func(doc map[string]json.RawMessage) error {
	if v < 0 || v >= len(migrations) {
		return nil
	}
	return migrations[v]
}

// migrateV1: version 2 only added effects_dropped (the effect log is compacted from
// version 2 on), so a version 1 document is already a version 2 one, with nothing
// dropped. A version 1 file that has the member was not written by a version 1 program.
func migrateV1(doc map[string]json.RawMessage) error {
	if _, ok := doc["effects_dropped"]; ok {
		return errors.New("effects_dropped: not a member of format_version 1")
	}
	return nil
}

// decode reads the bytes of a checkpoint file. path is only used in errors; wantID,
// when not empty, is the folder the file was found in. migrated reports that the file
// was in an older format and was converted in memory (the file itself is untouched).
func decode(path string, data []byte, wantID string) (cp *Checkpoint, migrated bool, err error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	finish := func(cp *Checkpoint, migrated bool) (*Checkpoint, bool, error) {
		if wantID != "" && cp.SessionID != wantID {
			return nil, false, corrupt("session_id %q does not match its folder %q", cp.SessionID, wantID)
		}
		if err := cp.Validate(); err != nil {
			return nil, false, corrupt("%s", err.Error())
		}
		return cp, migrated, nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, false, corrupt("empty file")
	}
	if reason := verifyChecksum(data); reason != "" {
		// A torn or hand-edited file usually fails both checks; the JSON error says
		// more about where the damage is.
		if syn := syntaxReason(data); syn != "" {
			return nil, false, corrupt("%s", syn)
		}
		return nil, false, corrupt("%s", reason)
	}

	cp, fast := decodeFast(data)
	if fast && cp.FormatVersion == FormatVersion {
		return finish(cp, false)
	}
	var derr error
	if !fast {
		// decodeFast accepts only what the strict decode accepts, so only now is
		// the strict decode worth its cost.
		cp = new(Checkpoint)
		derr = decodeStrict(data, cp)
	}
	version := cp.FormatVersion
	if derr != nil {
		if syn := syntaxReason(data); syn != "" {
			return nil, false, corrupt("%s", syn)
		}
		v, ok := peekVersion(data)
		if !ok {
			return nil, false, corrupt("%s", fieldReason(derr, data))
		}
		version = v
	}
	switch {
	case version > FormatVersion:
		return nil, false, corrupt("format_version %d was written by a newer upgrade-agent (this one reads up to %d)", version, FormatVersion)
	case version < FormatVersion:
		cp, err = migrate(data, version)
		if err != nil {
			return nil, false, corrupt("%s", err.Error())
		}
		migrated = true
	case derr != nil:
		return nil, false, corrupt("%s", fieldReason(derr, data))
	}

	return finish(cp, migrated)
}

// decodeFast decodes a file laid out the way Save writes it: it decodes the members
// before effects with encoding/json (strictly), finds the effects array with scanJSON's
// scanner and decodes its entries one by one, takes the state's bytes from between
// "state": (which must follow effects, if there are effects) and the checksum member,
// which must follow it, and only validates them with scanJSON. The caller has verified
// the checksum. ok is false for anything else, and then the full decode decides.
//
// One exception to decoding everything: once the effect log has shown one started
// effect more than MaxStartedEffects, the entries after it are not decoded, and
// Validate refuses the result with the reason it would give for the whole log. So a
// hostile file of 100,000 started effects costs a scan, not 100,000 decodes.
// FuzzDecodeFast holds this function to the full decode: the same checkpoint, or one
// that Validate refuses for the same reason.
func decodeFast(data []byte) (cp *Checkpoint, ok bool) {
	body := bytes.TrimRight(data, " \t\r\n")
	keyAt := len(body) - len(checksumTail) - checksumLen - len(checksumKey)
	if keyAt <= 0 || string(body[keyAt:keyAt+len(checksumKey)]) != checksumKey || !bytes.HasSuffix(body, []byte(checksumTail)) {
		return nil, false
	}
	cp = new(Checkpoint)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	stateKeyEnd := -1
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		if key == "state" {
			stateKeyEnd = int(dec.InputOffset())
			break
		}
		if key == "effects" {
			// The decoder stopped right after the key; the array and the "state"
			// key after it are taken from the bytes.
			if stateKeyEnd, ok = decodeEffectsFast(data, int(dec.InputOffset()), cp); !ok {
				return nil, false
			}
			break
		}
		target := fieldTarget(cp, key)
		if target == nil {
			return nil, false // unknown, or checksum before state
		}
		if err := dec.Decode(target); err != nil {
			return nil, false
		}
	}
	if stateKeyEnd < 0 {
		return nil, false // no state member
	}
	start := skipSpace(data, stateKeyEnd)
	if start >= len(data) || data[start] != ':' {
		return nil, false
	}
	start = skipSpace(data, start+1)
	end := keyAt
	for end > start && isSpace(data[end-1]) {
		end--
	}
	if end <= start || data[end-1] != ',' {
		return nil, false
	}
	end--
	for end > start && isSpace(data[end-1]) {
		end--
	}
	state := data[start:end:end]
	if valid, _ := scanJSON(state); !valid {
		return nil, false
	}
	cp.State = state
	cp.Checksum = string(body[keyAt+len(checksumKey) : len(body)-len(checksumTail)])
	return cp, true
}

// decodeEffectsFast decodes the effects member whose key ends at data[i:] into cp and
// returns where the "state" key that must follow it ends.
func decodeEffectsFast(data []byte, i int, cp *Checkpoint) (stateKeyEnd int, ok bool) {
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return 0, false
	}
	start := skipSpace(data, i+1)
	sc := jsonScanner{b: data, i: start}
	if !sc.value() {
		return 0, false
	}
	end := sc.i
	j := skipSpace(data, end)
	if j >= len(data) || data[j] != ',' {
		return 0, false
	}
	j = skipSpace(data, j+1)
	const stateKey = `"state"`
	if !bytes.HasPrefix(data[j:], []byte(stateKey)) {
		return 0, false
	}

	dec := json.NewDecoder(bytes.NewReader(data[start:end]))
	dec.DisallowUnknownFields()
	t, err := dec.Token()
	switch {
	case err != nil:
		return 0, false
	case t == nil: // null, which leaves the slice nil as encoding/json does
		return j + len(stateKey), true
	case t != json.Delim('['):
		return 0, false // the full decode names the type error
	}
	effs := []Effect{} // [] decodes to an empty slice, not nil
	started := 0
	for dec.More() && started <= MaxStartedEffects {
		effs = append(effs, Effect{})
		e := &effs[len(effs)-1]
		if err := dec.Decode(e); err != nil {
			return 0, false
		}
		if e.State == EffectStarted {
			started++
		}
	}
	cp.Effects = effs
	return j + len(stateKey), true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// fieldTarget returns where the member key of a checkpoint decodes to, except effects,
// state and checksum, which the fast paths handle themselves; nil for any other key.
func fieldTarget(cp *Checkpoint, key string) any {
	switch key {
	case "format_version":
		return &cp.FormatVersion
	case "session_id":
		return &cp.SessionID
	case "seq":
		return &cp.Seq
	case "parent_seq":
		return &cp.ParentSeq
	case "created_at":
		return &cp.CreatedAt
	case "updated_at":
		return &cp.UpdatedAt
	case "status":
		return &cp.Status
	case "next_node":
		return &cp.NextNode
	case "interrupt":
		return &cp.Interrupt
	case "counters":
		return &cp.Counters
	case "usage":
		return &cp.Usage
	case "summary":
		return &cp.Summary
	case "mcp":
		return &cp.MCP
	case "effects_dropped":
		return &cp.EffectsDropped
	case "upgrade_server":
		return &cp.UpgradeServer
	}
	return nil
}

// decodeStrict decodes exactly one object with no unknown members: a field this
// version does not know means the file is not of this version, and silently dropping
// it on the next Save would lose data.
func decodeStrict(data []byte, cp *Checkpoint) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cp); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("data after the checkpoint object at byte offset %d", dec.InputOffset())
	}
	return nil
}

func migrate(data []byte, from int) (*Checkpoint, error) {
	if migrationFrom(from) == nil {
		return nil, fmt.Errorf("unknown format_version %d (this upgrade-agent reads %d)", from, FormatVersion)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("format_version %d: %w", from, err)
	}
	for v := from; v < FormatVersion; v++ {
		m := migrationFrom(v)
		if m == nil {
			return nil, fmt.Errorf("no migration from format_version %d to %d", v, v+1)
		}
		if err := m(doc); err != nil {
			return nil, fmt.Errorf("migrating format_version %d to %d: %w", v, v+1, err)
		}
		doc["format_version"] = json.RawMessage(strconv.Itoa(v + 1))
	}
	b, err := marshalMembers(doc)
	if err != nil {
		return nil, fmt.Errorf("after migration from format_version %d: %w", from, err)
	}
	cp, ok := decodeFast(b)
	if !ok {
		cp = new(Checkpoint)
		if err := decodeStrict(b, cp); err != nil {
			return nil, fmt.Errorf("after migration from format_version %d: %s", from, fieldReason(err, b))
		}
	}
	if cp.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("after migration from format_version %d: format_version is %d", from, cp.FormatVersion)
	}
	return cp, nil
}

// memberOrder is the order of the members on disk: the declaration order of the fields
// of Checkpoint.
var memberOrder = &lazy.Value[map[string]int]{New: checkpointMemberOrder}

func checkpointMemberOrder() map[string]int {
	order := map[string]int{}
	t := reflect.TypeFor[Checkpoint]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		order[name] = i
	}
	return order
}

// marshalMembers encodes a migrated document compactly with its members in the order
// Save writes them (members this version does not know last, for the strict decode to
// name), so that the fast decode applies to it as to any current file. Values keep
// their bytes, compacted, with no HTML escaping added.
func marshalMembers(doc map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(doc))
	size := 2
	for k, v := range doc {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	rank := func(k string) int {
		if r, ok := memberOrder.Get()[k]; ok {
			return r
		}
		return len(memberOrder.Get())
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, err := canonjson.Marshal(k)
		if err != nil {
			return nil, err
		}
		buf.Write(key)
		buf.WriteByte(':')
		if err := json.Compact(buf, doc[k]); err != nil {
			return nil, fmt.Errorf("member %s: %w", k, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// peekVersion reads format_version alone, leniently, to tell a newer or older format
// from a damaged one when the strict decode fails.
func peekVersion(data []byte) (int, bool) {
	var h struct {
		FormatVersion *json.Number `json:"format_version"`
	}
	if err := json.Unmarshal(data, &h); err != nil || h.FormatVersion == nil {
		return 0, false
	}
	v, err := h.FormatVersion.Int64()
	if err != nil || v < -1<<31 || v > 1<<31-1 {
		return 0, false
	}
	return int(v), true
}

// syntaxReason returns "" for well-formed JSON, else where it breaks.
func syntaxReason(data []byte) string {
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	if err == nil {
		return ""
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(data, se.Offset)
		return fmt.Sprintf("broken JSON at line %d, column %d (byte %d): %v", line, col, se.Offset, se)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || err.Error() == "unexpected end of JSON input" {
		line, col := position(data, int64(len(data)))
		return fmt.Sprintf("broken JSON: truncated at line %d, column %d (byte %d)", line, col, len(data))
	}
	return "broken JSON: " + err.Error()
}

func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	prefix := data[:off]
	line = bytes.Count(prefix, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(prefix, '\n') + 1) + 1
	return line, col
}

// fieldReason turns a decoding error into a reason that names the field.
func fieldReason(err error, data []byte) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Sprintf("field %s: %s where %s was expected (byte %d)", field, te.Value, te.Type, te.Offset)
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		// encoding/json does not say which field a time came from; find the value.
		if i := bytes.Index(data, []byte(`"`+pe.Value+`"`)); i > 0 {
			if key := keyBefore(data[:i]); key != "" {
				return fmt.Sprintf("field %s: bad time %q: %v", key, pe.Value, err)
			}
		}
		return "bad time value: " + err.Error()
	}
	return "invalid content: " + err.Error()
}

// keyBefore returns the object key whose value starts right after prefix, if any.
func keyBefore(prefix []byte) string {
	p := bytes.TrimRight(prefix, " \t\r\n")
	if len(p) == 0 || p[len(p)-1] != ':' {
		return ""
	}
	p = bytes.TrimRight(p[:len(p)-1], " \t\r\n")
	if len(p) < 2 || p[len(p)-1] != '"' {
		return ""
	}
	start := bytes.LastIndexByte(p[:len(p)-1], '"')
	if start < 0 {
		return ""
	}
	return string(p[start+1 : len(p)-1])
}
