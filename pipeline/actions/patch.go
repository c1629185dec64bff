package actions

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Edits of a draft's params are JSON merge patches (RFC 7386) applied to
// the params as they were given, then bound once. A key of the patch that
// names a member of the document in another spelling (Conditions,
// experimentId) patches that member rather than adding a second one: the
// binder would read both as the same field given twice.

// MergePatch applies patch to doc (both JSON objects; an empty doc is {}):
// an object patches member by member, null removes a member, anything
// else (a list included) replaces it.
func MergePatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	var d any = map[string]any{}
	if len(doc) > 0 {
		var err error
		if d, err = decodeJSON(doc); err != nil {
			return nil, fmt.Errorf("params: %w", err)
		}
	}
	p, err := decodeJSON(patch)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	return json.Marshal(mergeValue(d, p))
}

func mergeValue(target, patch any) any {
	po, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	to, ok := target.(map[string]any)
	if !ok {
		to = map[string]any{}
	}
	for k, v := range po {
		k = memberKey(to, k)
		if v == nil {
			delete(to, k)
			continue
		}
		to[k] = mergeValue(to[k], v)
	}
	return to
}

// memberKey is the key of obj that k names in another case or spelling
// (Conditions, experimentId, Experiment ID), or k itself.
func memberKey(obj map[string]any, k string) string {
	if _, ok := obj[k]; ok {
		return k
	}
	for ek := range obj {
		if foldKey(ek) == foldKey(k) {
			return ek
		}
	}
	return k
}

// PathPatch is the merge patch that sets the member at path in doc to
// value (nil removes it). A path is a key, a dotted path
// (post_experiment_rule.rule) or one with list items (conditions[0].weight,
// conditions[2] to append). A merge patch cannot name a list item, so a
// path through a list patches the whole list: doc's list with that item
// set.
func PathPatch(doc json.RawMessage, path string, value any) (json.RawMessage, error) {
	keys, idx, err := splitPath(strings.TrimSpace(path))
	if err != nil {
		return nil, err
	}
	var cur map[string]any // doc's object at the level being patched
	if len(doc) > 0 {
		d, err := decodeJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("params: %w", err)
		}
		cur, _ = d.(map[string]any)
	}
	patch := map[string]any{}
	at := patch
	for i, k := range keys {
		k = memberKey(cur, k)
		if idx[i] >= 0 {
			// The list, copied, with the rest of the path set in it.
			list, _ := cur[k].([]any)
			whole := map[string]any{k: append([]any(nil), list...)}
			rest := fmt.Sprintf("%s[%d]", k, idx[i])
			if i+1 < len(keys) {
				rest += "." + rejoin(keys[i+1:], idx[i+1:])
			}
			if err := setPath(whole, rest, value); err != nil {
				return nil, err
			}
			at[k] = whole[k]
			return json.Marshal(patch)
		}
		if i == len(keys)-1 {
			at[k] = value
			return json.Marshal(patch)
		}
		next := map[string]any{}
		at[k] = next
		at = next
		cur, _ = cur[k].(map[string]any)
	}
	return json.Marshal(patch)
}

func rejoin(keys []string, idx []int) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k
		if idx[i] >= 0 {
			parts[i] += "[" + strconv.Itoa(idx[i]) + "]"
		}
	}
	return strings.Join(parts, ".")
}

// setPath sets (or, for a nil value, removes) the member at a path in
// params. Objects and list items on the way are made when missing; an
// index one past the end appends.
func setPath(params map[string]any, path string, value any) error {
	keys, idx, err := splitPath(path)
	if err != nil {
		return err
	}
	var cur any = params
	for i := range keys {
		last := i == len(keys)-1
		obj, ok := cur.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is not an object", strings.Join(keys[:i], "."))
		}
		k := memberKey(obj, keys[i])
		if idx[i] < 0 {
			if last {
				if value == nil {
					delete(obj, k)
				} else {
					obj[k] = value
				}
				return nil
			}
			next, ok := obj[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				obj[k] = next
			}
			cur = next
			continue
		}
		list, _ := obj[k].([]any)
		if idx[i] > len(list) {
			return fmt.Errorf("%s[%d]: the list has %d items", k, idx[i], len(list))
		}
		if idx[i] == len(list) {
			list = append(list, map[string]any{})
			obj[k] = list
		}
		if last {
			list[idx[i]] = value
			return nil
		}
		next, ok := list[idx[i]].(map[string]any)
		if !ok {
			next = map[string]any{}
			list[idx[i]] = next
		}
		cur = next
	}
	return nil
}

// splitPath splits a.b[2].c into keys and list indexes (-1: none).
func splitPath(path string) ([]string, []int, error) {
	if path == "" {
		return nil, nil, errors.New("empty key")
	}
	var keys []string
	var idx []int
	for _, part := range strings.Split(path, ".") {
		k, rest, hasIdx := strings.Cut(part, "[")
		n := -1
		if hasIdx {
			num, ok := strings.CutSuffix(rest, "]")
			v, err := strconv.Atoi(num)
			if !ok || err != nil || v < 0 {
				return nil, nil, fmt.Errorf("bad index in %q", part)
			}
			n = v
		}
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, nil, fmt.Errorf("empty name in %q", path)
		}
		keys = append(keys, k)
		idx = append(idx, n)
	}
	return keys, idx, nil
}
