package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Feature flag and segment import, as 6.5 answers them
// (upgrade-results-designs.md section 12).
//
// Flags: POST /flags/import/validation and /flags/import take {files:
// [{fileName, fileContent}]}. Validation answers [{fileName,
// compatibilityType}] and no reason: a file that does not parse, repeats a
// key of the batch, fails the validator, names an unknown context or
// whose key exists in its context is incompatible; one whose lists hold
// segments this server lacks (or has in another context) is a warning.
// Import makes every other file a new flag, disabled, with new ids (lists
// whose segments are missing are dropped from a warning file; include
// lists come in disabled) and answers [{fileName, error: null |
// "incompatible"}].
//
// Segments: POST /segments/import/validation and /segments/import take
// [{fileName, fileContent}] and look only at .json files. Each answers
// [{fileName, error, compatibilityType}], files that do not parse or lack
// a property first. A name a public segment of the context has, an
// unknown context or group type is incompatible, an unknown sub-segment a
// warning; import gives every file that parsed and has its properties a
// new id and creates it all the same, incompatible or not.
// POST /segments/validation answers only the results with an error.

func (s *Sim) importRoute(m string, segs, low []string) func(*call) {
	if m != http.MethodPost || len(segs) < 2 {
		return nil
	}
	n := len(segs)
	switch {
	case n == 2 && low[0] == "flags" && low[1] == "import":
		return func(c *call) { s.handleFlagImport(c, true) }
	case n == 3 && low[0] == "flags" && low[1] == "import" && low[2] == "validation":
		return func(c *call) { s.handleFlagImport(c, false) }
	case n == 2 && low[0] == "segments" && low[1] == "import":
		return func(c *call) { s.handleSegmentImport(c, segmentImportWrite) }
	case n == 3 && low[0] == "segments" && low[1] == "import" && low[2] == "validation":
		return func(c *call) { s.handleSegmentImport(c, segmentImportCheck) }
	case n == 2 && low[0] == "segments" && low[1] == "validation":
		return func(c *call) { s.handleSegmentImport(c, segmentImportErrors) }
	}
	return nil
}

// ---- flags ----

// flagImport is one flag file that may be imported.
type flagImport struct {
	flag map[string]any
	warn bool
}

func (s *Sim) handleFlagImport(c *call, write bool) {
	var body struct {
		Files []importFile `json:"files"`
	}
	if err := json.Unmarshal(c.body, &body); err != nil || body.Files == nil {
		c.fail(badBody("files: must be an array of {fileName, fileContent}"))
		return
	}
	if !write {
		s.answer(c, func() (any, *apiError) {
			out := []obj{}
			for i, v := range s.flagVerdicts(body.Files) {
				if v.compat == verdictRejected {
					// A rejected check answers an empty object.
					out = append(out, obj{})
					continue
				}
				out = append(out, obj{"fileName": body.Files[i].FileName, "compatibilityType": v.compat})
			}
			return out, nil
		})
		return
	}
	var out []byte
	err := s.mutate(func() (bool, *apiError) {
		verdicts := s.flagVerdicts(body.Files)
		res := []obj{}
		made := false
		for i, v := range verdicts {
			r := obj{"fileName": body.Files[i].FileName, "error": nil}
			res = append(res, r)
			if !importable(v.compat) {
				r["error"] = upgrade.Incompatible
				continue
			}
			if _, ok := v.imp.flag["description"].(string); !ok {
				// The validator lets it pass; the insert writes NULL into
				// a NOT NULL column. Each flag has its own transaction:
				// the flags made before this one stay.
				return made, &apiError{Status: 500, Name: "Error", Type: typeQueryFailed,
					Message: `Error in creating feature flag document "addFeatureFlagInDB" QueryFailedError: null value in column "description" of relation "feature_flag" violates not-null constraint`}
			}
			s.importFlagLocked(v.imp)
			made = true
		}
		b, err := json.Marshal(res)
		if err != nil {
			return made, storageError(err)
		}
		out = b
		return made, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.raw(http.StatusOK, out)
}

type flagVerdict struct {
	compat string
	imp    flagImport
}

// flagVerdicts validates flag files as validateImportFeatureFlags does.
func (s *Sim) flagVerdicts(files []importFile) []flagVerdict {
	cat := s.cat()
	var seen []string
	out := make([]flagVerdict, len(files))
	for i, f := range files {
		out[i].compat = upgrade.Incompatible
		var v any
		dec := json.NewDecoder(strings.NewReader(f.FileContent))
		dec.UseNumber()
		if dec.Decode(&v) != nil || v == nil {
			continue
		}
		m, _ := v.(map[string]any)
		key, _ := m["key"].(string)
		if slices.Contains(seen, key) {
			continue
		}
		seen = append(seen, key)
		if m == nil || checkImportedFlag(m) != nil {
			continue
		}
		ctx := m["context"].([]any)[0].(string)
		if _, known := s.meta[ctx]; !known {
			continue
		}
		if slices.ContainsFunc(cat.Flags, func(o *upgrade.FeatureFlag) bool { return o.Key == key && o.ContextName() == ctx }) {
			continue
		}
		if !hasFlagLists(m) {
			// The server's check reads both lists with flatMap: without
			// them it throws, and the file's verdict is lost (rejected).
			out[i].compat = verdictRejected
			continue
		}
		out[i].compat = upgrade.Compatible
		for _, id := range flagFileSubSegments(m) {
			if sg := cat.segment(id); sg == nil || sg.Context != ctx {
				out[i].compat = upgrade.Warning
			}
		}
		out[i].imp = flagImport{flag: m, warn: out[i].compat == upgrade.Warning}
	}
	return out
}

// verdictRejected marks a flag file whose check threw on the server.
const verdictRejected = "rejected"

// importable says whether a flag file's verdict lets the import make it.
func importable(compat string) bool { return compat == upgrade.Compatible || compat == upgrade.Warning }

// hasFlagLists says whether a flag file holds both list arrays.
func hasFlagLists(m map[string]any) bool {
	for _, lk := range flagListKeys {
		if _, ok := m[lk.key].([]any); !ok {
			return false
		}
	}
	return true
}

var flagListKeys = []struct{ key, kind string }{{"featureFlagSegmentInclusion", kindInclusion}, {"featureFlagSegmentExclusion", kindExclusion}}

// checkImportedFlag applies FeatureFlagImportDataValidation.
func checkImportedFlag(m map[string]any) *apiError {
	ck := &checker{}
	ck.flagFields(m)
	for _, lk := range flagListKeys {
		for i, l := range ck.objects(m, "", lk.key, false) {
			base := fmt.Sprintf("%s[%d]", lk.key, i)
			ck.boolean(l, base, "enabled", true)
			ck.str(l, base, "listType", true)
			sg := ck.object(l, base, "segment", true)
			if sg == nil {
				continue
			}
			sb := base + ".segment"
			ck.str(sg, sb, "name", true)
			ck.str(sg, sb, "context", true)
			ck.enum(sg, sb, "type", segmentTypes, true)
			for j, u := range ck.objects(sg, sb, "individualForSegment", true) {
				ck.str(u, fmt.Sprintf("%s.individualForSegment[%d]", sb, j), "userId", true)
			}
			for j, g := range ck.objects(sg, sb, "groupForSegment", true) {
				gb := fmt.Sprintf("%s.groupForSegment[%d]", sb, j)
				ck.str(g, gb, "groupId", true)
				ck.str(g, gb, "type", true)
			}
			for j, sub := range ck.objects(sg, sb, "subSegments", true) {
				subb := fmt.Sprintf("%s.subSegments[%d]", sb, j)
				ck.str(sub, subb, "name", true)
				ck.str(sub, subb, "context", true)
				ck.enum(sub, subb, "type", segmentTypes, true)
			}
		}
	}
	return ck.err()
}

// flagFileSubSegments lists the ids of the segments a flag file's lists
// hold.
func flagFileSubSegments(m map[string]any) []string {
	var ids []string
	for _, lk := range flagListKeys {
		for _, l := range objList(m[lk.key]) {
			ids = append(ids, listSubSegments(l)...)
		}
	}
	return ids
}

func listSubSegments(l map[string]any) []string {
	sg, _ := l["segment"].(map[string]any)
	var ids []string
	for _, sub := range objList(sg["subSegments"]) {
		if id, ok := sub["id"].(string); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func objList(v any) []map[string]any {
	a, _ := v.([]any)
	out := make([]map[string]any, 0, len(a))
	for _, el := range a {
		if o, ok := el.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func strOf(m map[string]any, key string) string {
	v, _ := m[key].(string)
	return v
}

// importFlagLocked creates one imported flag, disabled, with its lists.
func (s *Sim) importFlagLocked(fi flagImport) {
	cat := s.cat()
	m := fi.flag
	f := &upgrade.FeatureFlag{ID: s.newID(), Name: strOf(m, "name"), Key: strOf(m, "key"), Description: strOf(m, "description"),
		Status: upgrade.FlagDisabled, FilterMode: strOf(m, "filterMode"), Context: []string{}, Tags: []string{}}
	for _, v := range m["context"].([]any) {
		f.Context = append(f.Context, v.(string))
	}
	tags, _ := m["tags"].([]any)
	for _, v := range tags {
		f.Tags = append(f.Tags, v.(string))
	}
	now := s.timestamp()
	f.CreatedAt, f.UpdatedAt, f.VersionNumber = now, now, 1
	cat.Flags = append(cat.Flags, f)
	s.audit(upgrade.AuditFlagCreated, obj{"flagId": f.ID, "flagName": f.Name})
	for _, lk := range flagListKeys {
		for _, l := range objList(m[lk.key]) {
			ids := listSubSegments(l)
			if fi.warn && slices.ContainsFunc(ids, func(id string) bool {
				sg := cat.segment(id)
				return sg == nil || sg.Context != f.ContextName()
			}) {
				continue // a warning file loses the lists whose segments are missing
			}
			in := segmentOfFile(l["segment"].(map[string]any))
			in.ID = s.newID()
			if lt := strOf(l, "listType"); lt != "" {
				in.ListType = &lt
			}
			sg, aerr := s.upsertSegmentLocked(cat, in)
			if aerr != nil {
				continue
			}
			enabled, _ := l["enabled"].(bool)
			if lk.kind == kindInclusion {
				enabled = false // include lists come in disabled
			}
			cat.FlagLists = append(cat.FlagLists, &flagListRow{Kind: lk.kind, FlagID: f.ID, SegmentID: sg.ID, Enabled: enabled,
				ListType: strOf(l, "listType"), CreatedAt: now, UpdatedAt: now, VersionNumber: 1})
			s.auditFlagList(f, sg, lk.kind, "created", "")
		}
	}
}

// segmentOfFile reads an exported segment as a segment input: members
// from individualForSegment and groupForSegment, sub-segments by id.
func segmentOfFile(m map[string]any) *segmentInput {
	in := &segmentInput{Name: strOf(m, "name"), Context: strOf(m, "context"), Type: strOf(m, "type"),
		UserIDs: []string{}, Groups: []upgrade.GroupRef{}, SubSegmentIDs: []string{}}
	if d, ok := m["description"].(string); ok {
		in.Description = &d
	}
	if lt, ok := m["listType"].(string); ok {
		in.ListType = &lt
	}
	if tags, ok := m["tags"].([]any); ok {
		in.Tags = []string{}
		for _, t := range tags {
			if ts, ok := t.(string); ok {
				in.Tags = append(in.Tags, ts)
			}
		}
	}
	for _, u := range objList(m["individualForSegment"]) {
		in.UserIDs = append(in.UserIDs, strings.TrimSpace(strOf(u, "userId")))
	}
	for _, g := range objList(m["groupForSegment"]) {
		in.Groups = append(in.Groups, upgrade.GroupRef{Type: strOf(g, "type"), GroupID: strings.TrimSpace(strOf(g, "groupId"))})
	}
	for _, sub := range objList(m["subSegments"]) {
		in.SubSegmentIDs = append(in.SubSegmentIDs, strOf(sub, "id"))
	}
	return in
}

// ---- segments ----

type segmentImportMode int

const (
	segmentImportWrite  segmentImportMode = iota // /segments/import
	segmentImportCheck                           // /segments/import/validation
	segmentImportErrors                          // /segments/validation: only results with an error
)

// segmentFile is one segment file that parsed and has its properties.
type segmentFile struct {
	fileName string
	seg      map[string]any
}

func (s *Sim) handleSegmentImport(c *call, mode segmentImportMode) {
	var files []importFile
	if err := json.NewDecoder(bytes.NewReader(c.body)).Decode(&files); err != nil {
		c.fail(badBody("the body must be an array of {fileName, fileContent}"))
		return
	}
	run := func() (any, *apiError) {
		out, valid := s.segmentVerdicts(files)
		if mode == segmentImportErrors {
			out = slices.DeleteFunc(out, func(r obj) bool { return r["error"] == nil })
		}
		if mode != segmentImportWrite {
			return out, nil
		}
		for _, v := range valid {
			if aerr := s.importSegmentLocked(v.seg); aerr != nil {
				return nil, aerr
			}
		}
		return out, nil
	}
	if mode == segmentImportWrite {
		s.change(c, run)
		return
	}
	s.answer(c, run)
}

// segmentVerdicts validates segment files as checkSegmentsValidity does:
// the results (files that fail to parse or lack a property first) and
// the files import takes.
//
// The server checks the files concurrently and records a failure when its
// check ends: a parse failure first, then a file that lacks a property,
// and last a file with lists (private sub-segments), which waits for their
// checks too (probed on a real 6.5.0, docs/upgrade-real.md).
func (s *Sim) segmentVerdicts(files []importFile) ([]obj, []segmentFile) {
	var bad, badParsed, badLate, checked []obj
	var valid []segmentFile
	for _, f := range files {
		if path.Ext(f.FileName) != ".json" {
			continue
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(f.FileContent))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil || v == nil {
			msg := "Empty JSON"
			if err != nil {
				msg = err.Error()
			}
			bad = append(bad, obj{"fileName": f.FileName, "error": "Invalid JSON format: " + msg, "compatibilityType": upgrade.Incompatible})
			continue
		}
		m, _ := v.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		if msg := missingSegmentProps(m); msg != "" {
			res := obj{"fileName": f.FileName, "error": msg, "compatibilityType": upgrade.Incompatible}
			if slices.ContainsFunc(objList(m["subSegments"]), func(sub map[string]any) bool { return strOf(sub, "type") == upgrade.SegmentPrivate }) {
				badLate = append(badLate, res)
			} else {
				badParsed = append(badParsed, res)
			}
			continue
		}
		valid = append(valid, segmentFile{fileName: f.FileName, seg: m})
	}
	for _, v := range valid {
		msg, compat := s.segmentProblems(v.seg, "", false)
		res := obj{"fileName": v.fileName, "error": nil, "compatibilityType": compat}
		switch compat {
		case upgrade.Incompatible:
			res["error"] = "Invalid Segment data: " + msg
		case upgrade.Warning:
			res["error"] = "warning: " + msg
		}
		checked = append(checked, res)
	}
	return slices.Concat(bad, badParsed, badLate, checked), valid
}

// missingSegmentProps applies the segment input validator to a file and
// its private sub-segments (lists), in class-validator's words:
// SegmentService.checkForMissingProperties cuts a prefix that does not
// match ("Segment Input validator instance ..."), so every failing
// property keeps "An instance of SegmentInputValidator has failed the
// validation:\n" and they are joined with ", ". The members are checked
// as the validator's userIds, groups and subSegmentIds, made from the
// file's lists (convertJSONStringToSegInputValFormat; probed on a real
// 6.5.0, docs/upgrade-real.md).
func missingSegmentProps(m map[string]any) string {
	props := func(m map[string]any) string {
		var failed []string
		fail := func(prop string, cons ...string) {
			line := prop
			if len(cons) > 0 {
				line += " has failed the following constraints: " + strings.Join(cons, ", ") + " \n"
			}
			failed = append(failed, "An instance of SegmentInputValidator has failed the validation:\n - property "+line)
		}
		if v, ok := m["id"]; ok && v != nil {
			if id, isStr := v.(string); !isStr || !upgrade.IsUUID(id) {
				fail("id", "isUuid")
			}
		}
		for _, k := range []string{"name", "description", "listType", "context"} {
			v, ok := m[k]
			optional := k == "description" || k == "listType"
			switch str, isStr := v.(string); {
			case (!ok || v == nil) && optional:
			case !ok || v == nil:
				fail(k, "isString", "isNotEmpty")
			case !isStr:
				fail(k, "isString")
			case str == "" && !optional:
				fail(k, "isNotEmpty")
			}
		}
		if v, ok := m["type"]; !ok || v == nil || v == "" {
			fail("type", "isEnum", "isNotEmpty")
		} else if t, _ := v.(string); !slices.Contains(segmentTypes, t) {
			fail("type", "isEnum")
		}
		// each is the {each: true} string check of a member list made
		// from a file's list (absent when the file has none).
		each := func(prop, src, key string) {
			list, ok := m[src].([]any)
			if !ok {
				fail(prop, "isString", "isArray")
				return
			}
			for _, el := range list {
				em, _ := el.(map[string]any)
				if _, isStr := em[key].(string); !isStr || em[key] == "" {
					fail(prop, "isString")
					return
				}
			}
		}
		each("userIds", "individualForSegment", "userId")
		if tags, ok := m["tags"]; ok && tags != nil {
			if list, isArr := tags.([]any); !isArr {
				if _, isStr := tags.(string); isStr {
					fail("tags", "isArray")
				} else {
					fail("tags", "isString", "isArray")
				}
			} else if slices.ContainsFunc(list, func(v any) bool { _, isStr := v.(string); return !isStr }) {
				fail("tags", "isString")
			}
		}
		if groups, ok := m["groupForSegment"].([]any); !ok {
			fail("groups", "isArray")
		} else {
			// the elements' failures are children of one groups error
			var lines []string
			for i, g := range groups {
				gm, _ := g.(map[string]any)
				if strOf(gm, "type") == "" || strOf(gm, "groupId") == "" {
					lines = append(lines, fmt.Sprintf("groups[%d] has failed the following constraints: nestedValidation \n", i))
				}
			}
			if len(lines) > 0 {
				fail(strings.Join(lines, " - property "))
			}
		}
		subs, subsArr := m["subSegments"].([]any)
		if !slices.ContainsFunc(subs, func(v any) bool { return strOf(asObj(v), "type") == upgrade.SegmentPrivate }) {
			each("subSegmentIds", "subSegments", "id")
		}
		if v, ok := m["subSegments"]; ok && v != nil && !subsArr {
			fail("subSegments", "isArray")
		}
		return strings.Join(failed, ", ")
	}
	msg := props(m)
	for _, sub := range objList(m["subSegments"]) {
		if strOf(sub, "type") != upgrade.SegmentPrivate {
			continue
		}
		if sm := props(sub); sm != "" {
			msg += " in list " + strOf(sub, "name") + " " + sm
		}
	}
	return msg
}

func asObj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// segmentProblems is collectErrors: the message and compatibility of one
// segment (a list when isList, in context parent).
func (s *Sim) segmentProblems(m map[string]any, parent string, isList bool) (string, string) {
	cat := s.cat()
	ctx := strOf(m, "context")
	msg, compat := "", upgrade.Compatible
	subs := objList(m["subSegments"])
	private := slices.ContainsFunc(subs, func(sub map[string]any) bool { return strOf(sub, "type") == upgrade.SegmentPrivate })
	if !private {
		var missing []string
		for _, sub := range subs {
			id := strOf(sub, "id")
			if sg := cat.segment(id); sg == nil || sg.Context != ctx {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			msg += "SubSegment: " + strings.Join(missing, ", ") + " not found. Please import subSegment with same context and link in segment."
			compat = upgrade.Warning
		}
	} else {
		var parts []string
		worst := compat
		for _, sub := range subs {
			sm, sc := s.segmentProblems(sub, ctx, true)
			if sm != "" {
				parts = append(parts, sm)
			}
			if sc == upgrade.Incompatible || (sc == upgrade.Warning && worst == upgrade.Compatible) {
				worst = sc
			}
		}
		msg += strings.Join(parts, ", ")
		compat = worst
	}
	_, known := s.meta[ctx]
	switch {
	case !known || (parent != "" && ctx != parent):
		msg += "Context " + ctx + " not found. Please enter valid context in segment. "
		compat = upgrade.Incompatible
	default:
		var bad []string
		for _, g := range objList(m["groupForSegment"]) {
			if !slices.Contains(s.meta[ctx].GroupTypes, strOf(g, "type")) {
				bad = append(bad, strOf(g, "type"))
			}
		}
		if len(bad) > 0 {
			msg += "Group type: " + strings.Join(bad, ", ") + " not found. Please enter valid group type in segment. "
			compat = upgrade.Incompatible
		}
	}
	if isList && strOf(m, "listType") == "" {
		msg += "List type is required for lists. Please enter valid list type in segment. "
		compat = upgrade.Incompatible
	}
	if strOf(m, "type") != upgrade.SegmentPrivate {
		name := strOf(m, "name")
		if slices.ContainsFunc(cat.Segments, func(o *simSegment) bool {
			return o.Type == upgrade.SegmentPublic && o.Name == name && o.Context == ctx
		}) {
			msg += "Invalid Segment Name: " + name + " is already used by another segment with same context. "
			compat = upgrade.Incompatible
		}
	}
	return msg, compat
}

// importSegmentLocked creates one imported segment under a new id, its
// lists (private sub-segments) copied; no name check, as the server has
// none on this path.
func (s *Sim) importSegmentLocked(m map[string]any) *apiError {
	cat := s.cat()
	in := segmentOfFile(m)
	in.ID = s.newID()
	var lists []string
	subs := objList(m["subSegments"])
	if slices.ContainsFunc(subs, func(sub map[string]any) bool { return strOf(sub, "type") == upgrade.SegmentPrivate }) {
		for _, sub := range subs {
			li := segmentOfFile(sub)
			li.ID = s.newID()
			li.SubSegmentIDs = nil
			sg, aerr := s.upsertSegmentLocked(cat, li)
			if aerr != nil {
				return aerr
			}
			lists = append(lists, sg.ID)
		}
		in.SubSegmentIDs = nil
	} else if aerr := s.checkSubSegmentMix(cat, in); aerr != nil {
		return aerr
	}
	now := s.timestamp()
	sg := &simSegment{ID: in.ID, Name: in.Name, Description: in.Description, ListType: in.ListType, Context: in.Context,
		Type: in.Type, Tags: in.Tags, Users: dedup(in.UserIDs), Groups: dedupGroups(in.Groups),
		SubSegmentIDs: append(s.knownSegments(in.SubSegmentIDs), lists...), CreatedAt: now, UpdatedAt: now, VersionNumber: 1}
	cat.Segments = append(cat.Segments, sg)
	return nil
}
