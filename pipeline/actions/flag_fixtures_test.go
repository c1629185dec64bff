package actions

import "github.com/upgrade-agent/upgrade-agent/upgrade"

// Fixed flags and segments for tests and golden texts.
const (
	mathFlagID   = "6c31a2b4-0000-4000-8000-00000000f001"
	tutorFlagID  = "6c31a2b4-0000-4000-8000-00000000f002"
	incListID    = "ed61a2b4-0000-4000-8000-00000000e001"
	excListID    = "ed61a2b4-0000-4000-8000-00000000e002"
	pilotSegID   = "0af2a2b4-0000-4000-8000-00000000d001"
	districtID   = "0af2a2b4-0000-4000-8000-00000000d002"
	emptySegID   = "0af2a2b4-0000-4000-8000-00000000d003"
	streamSegID  = "0af2a2b4-0000-4000-8000-00000000d004"
	districtList = "ed61a2b4-0000-4000-8000-00000000e003"
)

func privateList(id string, users []string, groups []upgrade.GroupRef, subs ...string) *upgrade.SegmentRecord {
	r := &upgrade.SegmentRecord{ID: id, Name: id, Context: "assign-prog", Type: upgrade.SegmentPrivate,
		Users: []upgrade.SegmentUser{}, Groups: []upgrade.SegmentGroup{}, SubSegments: []upgrade.SegmentRecord{}}
	for _, u := range users {
		r.Users = append(r.Users, upgrade.SegmentUser{SegmentID: id, UserID: u})
	}
	for _, g := range groups {
		r.Groups = append(r.Groups, upgrade.SegmentGroup{SegmentID: id, GroupID: g.GroupID, Type: g.Type})
	}
	for _, s := range subs {
		r.SubSegments = append(r.SubSegments, upgrade.SegmentRecord{ID: s, Type: upgrade.SegmentPublic})
	}
	return r
}

// flagged is seeded() plus two segments and two flags:
//   - segment "pilot schools" (assign-prog): users u1, u2, group classId c7;
//   - segment "district 9" (assign-prog): holds "pilot schools";
//   - segment "empty" (assign-prog) and "stream beta" (mathstream, user s1);
//   - flag "Math hints" (MATH_HINTS, assign-prog, enabled, excludeAll):
//     include list = segment "pilot schools", exclude list = user u9;
//   - flag "Tutorbot" (TUTORBOT, mathstream, disabled, excludeAll), no lists;
//   - experiment "Tutorbot Hints" (enrolling) includes "district 9".
func flagged() *fakeAPI {
	f := seeded()
	f.addSegment(upgrade.SegmentRecord{ID: pilotSegID, Name: "pilot schools", Context: "assign-prog", Description: "spring pilot",
		Users:  []upgrade.SegmentUser{{UserID: "u1"}, {UserID: "u2"}},
		Groups: []upgrade.SegmentGroup{{GroupID: "c7", Type: "classId"}}, SubSegments: []upgrade.SegmentRecord{}})
	f.addSegment(upgrade.SegmentRecord{ID: districtID, Name: "district 9", Context: "assign-prog",
		Users: []upgrade.SegmentUser{}, Groups: []upgrade.SegmentGroup{},
		SubSegments: []upgrade.SegmentRecord{{ID: pilotSegID, Name: "pilot schools", Type: upgrade.SegmentPublic}}})
	f.addSegment(upgrade.SegmentRecord{ID: emptySegID, Name: "empty", Context: "assign-prog"})
	f.addSegment(upgrade.SegmentRecord{ID: streamSegID, Name: "stream beta", Context: "mathstream", Users: []upgrade.SegmentUser{{UserID: "s1"}}})
	f.addFlag(upgrade.FeatureFlag{ID: mathFlagID, Name: "Math hints", Key: "MATH_HINTS", Context: []string{"assign-prog"}, Tags: []string{},
		Status: FlagEnabled, FilterMode: FlagExcludeAll,
		Inclusion: []upgrade.FlagList{{SegmentID: incListID, FeatureFlagID: mathFlagID, Enabled: true, ListType: "Segment", CreatedAt: "2025-03-01T09:00:00Z",
			Segment: privateList(incListID, nil, nil, pilotSegID)}},
		Exclusion: []upgrade.FlagList{{SegmentID: excListID, FeatureFlagID: mathFlagID, Enabled: true, ListType: "Individual", CreatedAt: "2025-03-01T09:00:00Z",
			Segment: privateList(excListID, []string{"u9"}, nil)}},
	})
	f.addFlag(upgrade.FeatureFlag{ID: tutorFlagID, Name: "Tutorbot", Key: "TUTORBOT", Context: []string{"mathstream"}, Tags: []string{},
		Status: FlagDisabled, FilterMode: FlagExcludeAll})
	f.fl.expRows = []upgrade.ExperimentUsageRow{{SegmentID: districtList, ExperimentID: streamExpID,
		Experiment: &upgrade.UsageOwner{ID: streamExpID, Name: "Tutorbot Hints", State: upgrade.StateEnrolling},
		Segment:    privateList(districtList, nil, nil, districtID)}}
	return f
}
