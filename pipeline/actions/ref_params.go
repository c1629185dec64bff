package actions

import (
	"reflect"
	"strings"
)

// RefParams is the typed params value binding decoded, as the reference
// resolver sees it: the strings at each reference's path (Spec.Refs, read
// from the same struct's `ref` tags), replaced in place, and the few
// top-level members the flag and segment rules read (the params' context,
// a list action's list and kind). It holds a pointer to the value being
// bound: no JSON and no map in between, and the value binding hashes is
// the one resolved.
type RefParams struct {
	v reflect.Value // an addressable struct; invalid for params that are none
}

// refParamsOf views the typed params *p.
func refParamsOf[P any](p *P) RefParams {
	v := reflect.ValueOf(p).Elem()
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return RefParams{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return RefParams{}
	}
	return RefParams{v: v}
}

// resolve replaces every string at ref's path with fn's answer, and
// reports whether anything changed. A member the params' JSON would leave
// out (nil, or empty and omitempty) is not there to resolve.
func (p RefParams) resolve(ref Ref, fn func(value string) (string, error)) (bool, error) {
	if !p.v.IsValid() {
		return false, nil
	}
	return resolveIn(p.v, strings.Split(ref.Path, "."), fn)
}

func resolveIn(obj reflect.Value, path []string, fn func(string) (string, error)) (bool, error) {
	key, list := strings.CutSuffix(path[0], "[]")
	v, ok := member(obj, key)
	if !ok {
		return false, nil
	}
	var items []reflect.Value
	switch {
	case !list:
		items = []reflect.Value{v}
	case v.Kind() == reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			items = append(items, v.Index(i))
		}
	}
	changed := false
	for _, item := range items {
		item, ok := deref(item)
		if !ok {
			continue
		}
		if len(path) > 1 {
			if item.Kind() != reflect.Struct {
				continue
			}
			ch, err := resolveIn(item, path[1:], fn)
			if err != nil {
				return false, err
			}
			changed = changed || ch
			continue
		}
		if item.Kind() != reflect.String {
			continue
		}
		s := item.String()
		id, err := fn(s)
		if err != nil {
			return false, err
		}
		if id != s {
			item.SetString(id)
			changed = true
		}
	}
	return changed, nil
}

// member is the field of struct obj named key in JSON, with pointers
// followed; ok is false when the params' JSON would not hold it.
func member(obj reflect.Value, key string) (reflect.Value, bool) {
	f, ok := jsonFields(obj.Type())[key]
	if !ok {
		return reflect.Value{}, false
	}
	v := obj.FieldByIndex(f.Index)
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	opts = "," + opts + ","
	if strings.Contains(opts, ",omitempty,") && emptyJSON(v) || strings.Contains(opts, ",omitzero,") && v.IsZero() {
		return reflect.Value{}, false
	}
	return deref(v)
}

// emptyJSON: omitempty leaves v out of the JSON (encoding/json's rule).
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// deref follows pointers (and interfaces); ok is false at a nil.
func deref(v reflect.Value) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	if (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.IsNil() {
		return v, false
	}
	return v, true
}

// str is the top-level string member of that JSON name ("" when the
// params have none).
func (p RefParams) str(name string) string {
	if !p.v.IsValid() {
		return ""
	}
	v, ok := member(p.v, name)
	if !ok || v.Kind() != reflect.String {
		return ""
	}
	return v.String()
}

// setStr sets the top-level string member of that JSON name, and reports
// whether the params have one.
func (p RefParams) setStr(name, value string) bool {
	if !p.v.IsValid() {
		return false
	}
	f, ok := jsonFields(p.v.Type())[name]
	if !ok {
		return false
	}
	v, ok := deref(p.v.FieldByIndex(f.Index))
	if !ok || v.Kind() != reflect.String || !v.CanSet() {
		return false
	}
	v.SetString(value)
	return true
}
