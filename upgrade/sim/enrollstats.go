package sim

import (
	"slices"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// handleEnrollmentTotals answers POST /stats/enrollment: enrolled users
// and groups per experiment, 0/0 for an id the server does not know.
func (s *Sim) handleEnrollmentTotals(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	raw, ok := m["experimentIds"].([]any)
	if !ok {
		c.fail(badBody("experimentIds: must be an array of strings"))
		return
	}
	type total struct {
		ID     string `json:"id"`
		Users  int    `json:"users"`
		Groups int    `json:"groups"`
	}
	out := []total{}
	if err := s.view(func() {
		for _, v := range raw {
			id, _ := v.(string)
			t := total{ID: id}
			if s.idx[id] != nil {
				st, _ := s.statsLocked(id)
				t.Users, t.Groups = st.Users, st.Groups
			}
			out = append(out, t)
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

// dateRange is a dateEnum value: how many buckets and their size.
type dateRange struct {
	n     int
	month bool
}

// dateRanges are the dateEnum values, in the order of rangeNames (a slice
// the compiler lays out: a package-level map is built at init).
var dateRanges = []struct {
	name string
	r    dateRange
}{
	{"last_seven_days", dateRange{7, false}},
	{"last_fourteen_days", dateRange{14, false}},
	{"last_thirty_days", dateRange{30, false}},
	{"last_three_months", dateRange{3, true}},
	{"last_six_months", dateRange{6, true}},
	{"last_twelve_months", dateRange{12, true}},
	{"total", dateRange{0, true}},
}

// dateRangeOf is the range of a dateEnum value; zero for an unknown one.
func dateRangeOf(enum string) dateRange {
	for _, d := range dateRanges {
		if d.name == enum {
			return d.r
		}
	}
	return dateRange{}
}

// handleEnrollmentByDate answers POST /stats/enrollment/date: newest
// bucket first, each dated with JavaScript's toDateString of the client's
// local time (now shifted by clientOffset minutes), counting the
// enrollments made in the bucket.
func (s *Sim) handleEnrollmentByDate(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	id := ck.str(m, "", "experimentId", true)
	enum := ck.enum(m, "", "dateEnum", rangeNames(), true)
	ck.number(m, "", "clientOffset", false, true)
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	offset, _ := numberOf(m["clientOffset"])
	shift := time.Duration(offset * float64(time.Minute))
	var out []any
	err := s.view(func() {
		e := s.idx[id]
		if e == nil {
			aerr = typeError("Cannot read properties of undefined (reading 'conditions')")
			return
		}
		now := s.now().UTC().Add(shift)
		out = s.dateBucketsLocked(e, enum, now, shift)
	})
	if err != nil {
		c.failErr(err)
		return
	}
	if aerr != nil {
		c.fail(aerr)
		return
	}
	c.ok(out)
}

func rangeNames() []string {
	out := make([]string, 0, len(dateRanges))
	for _, d := range dateRanges {
		out = append(out, d.name)
	}
	return out
}

func (s *Sim) dateBucketsLocked(e *upgrade.Experiment, enum string, now time.Time, shift time.Duration) []any {
	r := dateRangeOf(enum)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	var starts []time.Time
	var next func(time.Time) time.Time
	switch {
	case enum == "total":
		created, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
		if err != nil {
			created = now
		}
		created = created.UTC().Add(shift)
		for y := now.Year(); y >= created.Year(); y-- {
			starts = append(starts, time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC))
		}
		next = func(t time.Time) time.Time { return t.AddDate(1, 0, 0) }
	case r.month:
		first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		for i := 0; i < r.n; i++ {
			starts = append(starts, first.AddDate(0, -i, 0))
		}
		next = func(t time.Time) time.Time { return t.AddDate(0, 1, 0) }
	default:
		for i := 0; i < r.n; i++ {
			starts = append(starts, day.AddDate(0, 0, -i))
		}
		next = func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }
	}
	rt := s.st.Runtime[e.ID]
	out := make([]any, 0, len(starts))
	for _, from := range starts {
		to := next(from)
		in := func(en *enrollment) bool {
			at, err := time.Parse(time.RFC3339Nano, en.At)
			if err != nil {
				return false
			}
			at = at.UTC().Add(shift)
			return !at.Before(from) && at.Before(to)
		}
		conds := []any{}
		for _, cnd := range e.Conditions {
			parts := []any{}
			for _, p := range e.Partitions {
				users, groups := 0, map[string]bool{}
				if rt != nil {
					for _, en := range rt.Enrolled {
						if en.ConditionID == cnd.ID && in(en) && slices.Contains(en.Partitions, p.ID) {
							users++
							if en.GroupID != "" {
								groups[en.GroupID] = true
							}
						}
					}
				}
				parts = append(parts, obj{"id": p.ID, "users": users, "groups": len(groups)})
			}
			conds = append(conds, obj{"id": cnd.ID, "partitions": parts})
		}
		out = append(out, obj{"date": from.Format("Mon Jan 02 2006"),
			"stats": obj{"id": e.ID, "conditions": conds}})
	}
	return out
}
