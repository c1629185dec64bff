package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
)

// handleFeatureFlag is POST /v6/featureflag: the keys of the flags served to
// the user in a context, decided by flageval (the same code as `flags
// explain`). Each key served records one exposure per (flag, user).
func (s *Sim) handleFeatureFlag(c *call) {
	uid, ok := requireUser(c)
	if !ok {
		return
	}
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	ctx := ck.str(m, "", "context", true)
	gv, gSent := m["groupsForSession"]
	iv, iSent := m["includeStoredUserGroups"]
	gSent, iSent = gSent && gv != nil, iSent && iv != nil
	if gSent != iSent {
		ck.failf("groupsForSession", "groupsForSession and includeStoredUserGroups must be sent together")
	}
	if gSent {
		ck.object(m, "", "groupsForSession", true)
		ck.boolean(m, "", "includeStoredUserGroups", true)
	}
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	var body struct {
		Groups        map[string][]string `json:"groupsForSession"`
		IncludeStored bool                `json:"includeStoredUserGroups"`
	}
	if err := json.Unmarshal(c.body, &body); err != nil {
		c.fail(badBody("groupsForSession: " + err.Error()))
		return
	}
	if _, known := s.meta[ctx]; !known {
		c.fail(&apiError{Status: 400, Name: "Error", Message: "Invalid app context: " + ctx, Type: typeIncorrectParam})
		return
	}
	var keys []string
	err := s.mutate(func() (bool, *apiError) {
		u := s.st.Users[uid]
		if u == nil && (!gSent || body.IncludeStored) {
			return false, userNotDefined(uid)
		}
		who := flageval.User{ID: uid}
		var stored map[string][]string
		if u != nil {
			stored, who.WorkingGroup = u.Group, u.WorkingGroup
		}
		who.Groups = flageval.SessionGroups(stored, body.Groups, gSent, body.IncludeStored)
		cat := s.cat()
		changed := false
		keys = []string{}
		for _, f := range cat.Flags {
			flag, segs, global := cat.evalInput(f)
			if !flageval.Evaluate(flageval.Input{Flag: flag, Context: ctx, User: who, Segments: segs, GlobalExclude: global}).Served {
				continue
			}
			keys = append(keys, f.Key)
			if !slices.Contains(cat.Exposures[f.ID], uid) {
				if cat.Exposures == nil {
					cat.Exposures = map[string][]string{}
				}
				cat.Exposures[f.ID] = append(cat.Exposures[f.ID], uid)
				changed = true
			}
		}
		return changed, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(keys)
}

// handleAudit is POST /audit: the log newest first, optionally of one
// experiment or flag.
func (s *Sim) handleAudit(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	ck.number(m, "", "skip", true, true)
	ck.number(m, "", "take", true, true)
	filter := ck.enum(m, "", "filter", auditTypes, false)
	exp := ck.str(m, "", "experimentId", false)
	flag := ck.str(m, "", "flagId", false)
	for k, v := range map[string]string{"experimentId": exp, "flagId": flag} {
		if v != "" && !upgrade.IsUUID(v) {
			ck.failf(k, "must be a UUID")
		}
	}
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	skip, take := intOf(m["skip"]), intOf(m["take"])
	s.answer(c, func() (any, *apiError) {
		var rows []*auditRow
		for _, a := range s.cat().Audit {
			switch {
			case filter != "" && a.Type != filter:
			case exp != "" && a.Data["experimentId"] != exp:
			case flag != "" && a.Data["flagId"] != flag:
			default:
				rows = append(rows, a)
			}
		}
		// Newest first; the log is appended in time order.
		slices.Reverse(rows)
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].CreatedAt > rows[j].CreatedAt })
		total := len(rows)
		nodes := []any{}
		for _, a := range page(rows, skip, take) {
			nodes = append(nodes, obj{"id": a.ID, "type": a.Type, "data": a.Data, "createdAt": a.CreatedAt,
				"updatedAt": a.CreatedAt, "versionNumber": 1, "user": nil})
		}
		out := obj{"total": total, "nodes": nodes}
		// The answer echoes the parameters sent.
		for _, k := range []string{"skip", "take", "filter", "experimentId", "flagId"} {
			if v, ok := m[k]; ok {
				out[k] = v
			}
		}
		return out, nil
	})
}

// auditTypes are the server's LOG_TYPE values, the filters POST /audit takes.
var auditTypes = []string{"experimentCreated", "experimentUpdated", "experimentStateChanged", "experimentDeleted",
	"experimentDataExported", "experimentDesignExported", "featureFlagCreated", "featureFlagUpdated",
	"featureFlagStatusChanged", "featureFlagDeleted", "featureFlagDataExported", "featureFlagDesignExported"}

// auditDiff is the "diff" text of an update entry: the fields that changed,
// one "-" and one "+" line each (the server's is a coloured diff of the
// whole document).
func auditDiff(old, now any) string {
	var a, b map[string]any
	ja, _ := json.Marshal(old)
	jb, _ := json.Marshal(now)
	_ = json.Unmarshal(ja, &a)
	_ = json.Unmarshal(jb, &b)
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := " {\n"
	for _, k := range keys {
		x, _ := json.Marshal(a[k])
		y, _ := json.Marshal(b[k])
		if string(x) != string(y) {
			out += fmt.Sprintf("-  %s: %s\n+  %s: %s\n", k, x, k, y)
		}
	}
	return out + " }\n"
}

// auditFlagList records a flag list change as the server does: a
// featureFlagUpdated entry naming the list and the operation.
func (s *Sim) auditFlagList(f *upgrade.FeatureFlag, sg *simSegment, kind, op string, diff string) {
	list := obj{"listId": sg.ID, "listName": sg.Name, "filterType": kind, "operation": op}
	if diff != "" {
		list["diff"] = diff
	}
	s.audit(upgrade.AuditFlagUpdated, obj{"flagId": f.ID, "flagName": f.Name, "list": list})
}

// auditExperimentList records an experiment list change the same way.
func (s *Sim) auditExperimentList(e *upgrade.Experiment, r *listRow, op, diff string) {
	list := obj{"listId": r.ID, "listName": r.Name, "filterType": r.Kind, "operation": op}
	if diff != "" {
		list["diff"] = diff
	}
	s.auditExperiment(upgrade.AuditExperimentUpdated, e, obj{"list": list})
}

// auditExperiment records an experiment audit entry; experiments.go calls
// it on create and state change.
func (s *Sim) auditExperiment(typ string, e *upgrade.Experiment, extra obj) {
	data := obj{"experimentId": e.ID, "experimentName": e.Name}
	for k, v := range extra {
		data[k] = v
	}
	s.audit(typ, data)
}
