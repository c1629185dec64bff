package actions

func flagPlanCases() []planCase {
	return []planCase{
		{name: "flag_create_defaults", flags: true, p: CreateFeatureFlagParams{Name: "Hint panel", Key: "HINT_PANEL", Context: "assign-prog"}},
		{name: "flag_create_lists", flags: true, p: CreateFeatureFlagParams{Name: "Class 7 hints", Key: "math_hints", Context: "assign-prog",
			Description: "hints for class 7", Tags: []string{"pilot"}, Status: "Enabled",
			IncludeLists: []FlagListParam{{Groups: []GroupParam{{Type: "classId", GroupID: "c7"}}}, {SegmentIDs: []string{districtID}, Enabled: ptr(false)}},
			ExcludeLists: []FlagListParam{{Users: []string{"u9", "u10"}}}}},
		{name: "flag_create_includeall_enabled", flags: true, p: CreateFeatureFlagParams{Name: "Everyone", Key: "EVERYONE", Context: "mathstream",
			Status: "enabled", FilterMode: "includeAll"}},
		{name: "flag_update_key", flags: true, p: UpdateFeatureFlagParams{FlagID: mathFlagID, Key: ptr("MATH_HINTS_V2"), Description: ptr("v2")}},
		{name: "flag_update_filter_mode", flags: true, p: UpdateFeatureFlagParams{FlagID: mathFlagID, FilterMode: ptr("include all")}},
		{name: "flag_status_enable_nobody", flags: true, p: UpdateFeatureFlagStatusParams{FlagID: tutorFlagID, Status: "on"}},
		{name: "flag_status_disable", flags: true, p: UpdateFeatureFlagStatusParams{FlagID: mathFlagID, Status: "disabled"}},
		{name: "flag_delete", flags: true, p: DeleteFeatureFlagParams{FlagID: mathFlagID}},
		{name: "flag_list_add_group", flags: true, p: AddFeatureFlagListParams{FlagID: tutorFlagID, Kind: "include", Groups: []GroupParam{{Type: "classId", GroupID: "c7"}}}},
		{name: "flag_list_add_segment", flags: true, p: AddFeatureFlagListParams{FlagID: mathFlagID, Kind: "Inclusion", SegmentIDs: []string{districtID}}},
		{name: "flag_list_update_members", flags: true, p: UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "exclude", ListID: excListID,
			Users: &[]string{"u9", "u11", "u12"}}},
		{name: "flag_list_update_disable", flags: true, p: UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "include", ListID: incListID, Enabled: ptr(false)}},
		{name: "flag_list_remove", flags: true, p: RemoveFeatureFlagListParams{FlagID: mathFlagID, Kind: "include", ListID: incListID}},
		{name: "segment_create", flags: true, p: CreateSegmentParams{Name: "pilot teachers", Context: "assign-prog", Users: []string{"t1"},
			Groups: []GroupParam{{Type: "instructorId", GroupID: "i3"}}, SegmentIDs: []string{pilotSegID}}},
		{name: "segment_update_add_remove", flags: true, p: UpdateSegmentParams{SegmentID: pilotSegID, AddUsers: []string{"u3"}, RemoveUsers: []string{"u1"},
			AddGroups: []GroupParam{{Type: "classId", GroupID: "c8"}}}},
		{name: "segment_update_empty_used", flags: true, p: UpdateSegmentParams{SegmentID: pilotSegID, Users: &[]string{}, Groups: &[]GroupParam{}}},
		{name: "segment_delete_used", flags: true, p: DeleteSegmentParams{SegmentID: pilotSegID}},
		{name: "segment_delete_unused", flags: true, p: DeleteSegmentParams{SegmentID: emptySegID}},
	}
}
