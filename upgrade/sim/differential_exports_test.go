package sim

import "net/http"

// scenarioExports compares the exports of an enabled flag with an include
// list and of a segment with a sub-segment, shapes and state names.
func scenarioExports(p *party) {
	child, parent := p.id("seg/child"), p.id("seg/parent")
	p.call("create the child segment", "POST", "/segments", p.seg(child, p.named("child"), "public", []string{p.user("1")}, nil, nil), noShape())
	p.call("create the parent segment", "POST", "/segments", p.seg(parent, p.named("parent"), "public", []string{p.user("2")},
		[][2]string{{"schoolId", "s1"}}, []string{child}), noShape())
	p.call("[segment export: sub-segments]", "GET", "/segments/export/json?ids="+parent+"&ids="+child, nil,
		values("#", "0.name", "0.type", "#0.individualForSegment", "#0.groupForSegment", "#0.subSegments", "0.subSegments.0.name",
			"0.subSegments.0.type", "#0.subSegments.0.individualForSegment", "1.name", "#1.subSegments"))
	id := p.newFlag("create the flag", "exp")
	p.addFlagList("include the parent", "inclusion", p.flagList(id, "inc", "Segment", true, nil, nil, []string{parent}))
	p.call("enable the flag", "PATCH", "/flags/status", map[string]any{"flagId": id, "status": "enabled"}, values("status"))
	ex := p.call("[flag export: enabled]", "GET", "/flags/export/"+id, nil,
		values("status", "filterMode", "#featureFlagSegmentInclusion", "featureFlagSegmentInclusion.0.enabled",
			"featureFlagSegmentInclusion.0.listType", "featureFlagSegmentInclusion.0.segment.type",
			"#featureFlagSegmentInclusion.0.segment.subSegments", "featureFlagSegmentInclusion.0.segment.subSegments.0.name",
			"#featureFlagSegmentExclusion"))
	if ex.status == http.StatusOK {
		p.call("[flag export: enabled] read", "GET", "/flags/"+id, nil, noShape(), values("status"))
	}
}
