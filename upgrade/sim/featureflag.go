package sim

import (
	"encoding/json"
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
		c.fail(&apiError{Status: 400, Name: "Error", Message: "Invalid app context: " + ctx})
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
	exp := ck.str(m, "", "experimentId", false)
	flag := ck.str(m, "", "flagId", false)
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	skip, take := intOf(m["skip"]), intOf(m["take"])
	s.answer(c, func() (any, *apiError) {
		var rows []*auditRow
		for _, a := range s.cat().Audit {
			switch {
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
		return obj{"total": total, "nodes": nodes}, nil
	})
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
