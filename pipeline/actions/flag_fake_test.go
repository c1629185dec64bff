package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// flagStore is the fake's feature flags and public segments, answering as
// UpGrade 6.5 does where the actions depend on it: lists as private
// segments, usage rows for every list, a deleted segment vanishing from
// every list, a context change dropping the lists.
type flagStore struct {
	flags    map[string]*upgrade.FeatureFlag
	order    []string
	segs     map[string]*upgrade.SegmentRecord
	segOrder []string
	expRows  []upgrade.ExperimentUsageRow // experiment inclusion rows (tests set them)
	n        int
	tick     int
	// forceStatus, when set, is the status every created flag gets (a
	// server that does not keep what was sent).
	forceStatus string
}

func newFlagStore() *flagStore {
	return &flagStore{flags: map[string]*upgrade.FeatureFlag{}, segs: map[string]*upgrade.SegmentRecord{}}
}

func clone[T any](v T) T {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

func (s *flagStore) stamp() string {
	s.tick++
	return time.Date(2025, 4, 1, 9, 0, s.tick, 0, time.UTC).Format(time.RFC3339)
}

func (s *flagStore) newID() string {
	s.n++
	return fakeID(5, s.n)
}

func flagNotFound(id string) error {
	return &upgrade.Error{Category: upgrade.CategoryNotFound, Status: http.StatusNoContent, Method: "GET", URL: "/flags/" + id, Message: "feature flag " + id + " not found"}
}

func segNotFound(id string) error {
	return &upgrade.Error{Category: upgrade.CategoryNotFound, Status: http.StatusNotFound, Method: "GET", URL: "/segments/" + id, Message: "Segment not found."}
}

// addFlag stores a flag as the server holds it (tests).
func (f *fakeAPI) addFlag(fl upgrade.FeatureFlag) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.fl
	c := clone(fl)
	if c.UpdatedAt == "" {
		c.CreatedAt = s.stamp()
		c.UpdatedAt = c.CreatedAt
		c.VersionNumber = 1
	}
	if _, ok := s.flags[c.ID]; !ok {
		s.order = append(s.order, c.ID)
	}
	s.flags[c.ID] = &c
}

// addSegment stores a public segment (tests).
func (f *fakeAPI) addSegment(seg upgrade.SegmentRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fl.putSegment(seg)
}

func (s *flagStore) putSegment(seg upgrade.SegmentRecord) *upgrade.SegmentRecord {
	c := clone(seg)
	if c.Type == "" {
		c.Type = upgrade.SegmentPublic
	}
	if _, ok := s.segs[c.ID]; !ok {
		s.segOrder = append(s.segOrder, c.ID)
		c.CreatedAt = s.stamp()
		c.VersionNumber = 0
	}
	c.VersionNumber++
	c.UpdatedAt = s.stamp()
	s.segs[c.ID] = &c
	return &c
}

func (s *flagStore) subRefs(ids []string) []upgrade.SegmentRecord {
	out := []upgrade.SegmentRecord{}
	for _, id := range ids {
		if sub, ok := s.segs[id]; ok { // unknown ids are dropped, as UpGrade does
			out = append(out, upgrade.SegmentRecord{ID: sub.ID, Name: sub.Name, Context: sub.Context, Type: sub.Type})
		}
	}
	return out
}

func (s *flagStore) recordOf(in upgrade.SegmentInput, typ string) upgrade.SegmentRecord {
	r := upgrade.SegmentRecord{ID: in.ID, Name: in.Name, Description: in.Description, Context: in.Context, Type: typ, ListType: in.ListType,
		Tags: in.Tags, Users: []upgrade.SegmentUser{}, Groups: []upgrade.SegmentGroup{}, SubSegments: s.subRefs(in.SubSegmentIDs)}
	for _, u := range in.UserIDs {
		r.Users = append(r.Users, upgrade.SegmentUser{SegmentID: in.ID, UserID: u})
	}
	for _, g := range in.Groups {
		r.Groups = append(r.Groups, upgrade.SegmentGroup{SegmentID: in.ID, GroupID: g.GroupID, Type: g.Type})
	}
	return r
}

func (f *fakeAPI) Flags(ctx context.Context) ([]upgrade.FeatureFlag, error) {
	if err := f.enter("Flags"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []upgrade.FeatureFlag{}
	for _, id := range f.fl.order {
		if fl, ok := f.fl.flags[id]; ok {
			c := clone(*fl)
			c.Inclusion, c.Exclusion = nil, nil
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeAPI) Flag(ctx context.Context, id string) (*upgrade.FeatureFlag, error) {
	if err := f.enter("Flag"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.fl.flags[id]
	if !ok {
		return nil, flagNotFound(id)
	}
	c := clone(*fl)
	if c.Inclusion == nil {
		c.Inclusion = []upgrade.FlagList{}
	}
	if c.Exclusion == nil {
		c.Exclusion = []upgrade.FlagList{}
	}
	return &c, nil
}

func (f *fakeAPI) CreateFlag(ctx context.Context, in *upgrade.FeatureFlag) (*upgrade.FeatureFlag, error) {
	if err := f.enter("CreateFlag"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.fl.flags {
		if fl.Key == in.Key && slices.Equal(fl.Context, in.Context) {
			return nil, &upgrade.Error{Category: upgrade.CategoryValidation, Status: http.StatusConflict, Message: "A flag with this key already exists for this app-context"}
		}
	}
	c := clone(*in)
	c.ID = f.fl.newID()
	c.Inclusion, c.Exclusion = nil, nil
	if f.fl.forceStatus != "" {
		c.Status = f.fl.forceStatus
	}
	c.CreatedAt = f.fl.stamp()
	c.UpdatedAt, c.VersionNumber = c.CreatedAt, 1
	f.fl.order = append(f.fl.order, c.ID)
	f.fl.flags[c.ID] = &c
	out := clone(c)
	return &out, nil
}

func (f *fakeAPI) touchFlag(fl *upgrade.FeatureFlag) {
	fl.VersionNumber++
	fl.UpdatedAt = f.fl.stamp()
}

func (f *fakeAPI) UpdateFlag(ctx context.Context, in *upgrade.FeatureFlag) (*upgrade.FeatureFlag, error) {
	if err := f.enter("UpdateFlag"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.fl.flags[in.ID]
	if !ok {
		return nil, flagNotFound(in.ID)
	}
	if len(in.Context) > 0 && len(fl.Context) > 0 && in.Context[0] != fl.Context[0] {
		fl.Inclusion, fl.Exclusion = nil, nil // UpGrade drops every list
	}
	fl.Name, fl.Key, fl.Description, fl.Context, fl.Tags, fl.Status, fl.FilterMode = in.Name, in.Key, in.Description, in.Context, in.Tags, in.Status, in.FilterMode
	f.touchFlag(fl)
	out := clone(*fl)
	return &out, nil
}

func (f *fakeAPI) patch(method, id string, set func(fl *upgrade.FeatureFlag)) (*upgrade.FeatureFlag, error) {
	if err := f.enter(method); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.fl.flags[id]
	if !ok {
		return nil, flagNotFound(id)
	}
	set(fl)
	f.touchFlag(fl)
	out := clone(*fl)
	out.Inclusion, out.Exclusion = nil, nil
	return &out, nil
}

func (f *fakeAPI) SetFlagStatus(ctx context.Context, id, status string) (*upgrade.FeatureFlag, error) {
	return f.patch("SetFlagStatus", id, func(fl *upgrade.FeatureFlag) { fl.Status = status })
}

func (f *fakeAPI) SetFlagFilterMode(ctx context.Context, id, mode string) (*upgrade.FeatureFlag, error) {
	return f.patch("SetFlagFilterMode", id, func(fl *upgrade.FeatureFlag) { fl.FilterMode = mode })
}

func (f *fakeAPI) DeleteFlag(ctx context.Context, id string) (*upgrade.FeatureFlag, error) {
	if err := f.enter("DeleteFlag"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.fl.flags[id]
	if !ok {
		return nil, flagNotFound(id)
	}
	delete(f.fl.flags, id)
	out := clone(*fl)
	return &out, nil
}

func (f *fakeAPI) listsOf(fl *upgrade.FeatureFlag, kind upgrade.ListKind) *[]upgrade.FlagList {
	if kind == upgrade.ListExclusion {
		return &fl.Exclusion
	}
	return &fl.Inclusion
}

func (f *fakeAPI) AddFlagList(ctx context.Context, kind upgrade.ListKind, in upgrade.FlagListInput) (*upgrade.FlagList, error) {
	if err := f.enter("AddFlagList"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.fl.flags[in.FlagID]
	if !ok {
		return nil, flagNotFound(in.FlagID)
	}
	if in.Segment.ID == "" {
		in.Segment.ID = f.fl.newID()
	}
	rec := f.fl.recordOf(in.Segment, upgrade.SegmentPrivate) // forced private
	now := f.fl.stamp()
	row := upgrade.FlagList{SegmentID: rec.ID, FeatureFlagID: fl.ID, Enabled: in.Enabled, ListType: in.ListType, CreatedAt: now, UpdatedAt: now, VersionNumber: 1, Segment: &rec}
	lists := f.listsOf(fl, kind)
	*lists = append(*lists, row)
	out := clone(row)
	return &out, nil
}

func (f *fakeAPI) UpdateFlagList(ctx context.Context, kind upgrade.ListKind, in upgrade.FlagListInput) (*upgrade.FlagList, error) {
	if err := f.enter("UpdateFlagList"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.fl.flags {
		lists := f.listsOf(fl, kind)
		for i := range *lists {
			if (*lists)[i].SegmentID == in.Segment.ID {
				rec := f.fl.recordOf(in.Segment, upgrade.SegmentPrivate)
				(*lists)[i].Enabled, (*lists)[i].ListType, (*lists)[i].Segment = in.Enabled, in.ListType, &rec
				(*lists)[i].UpdatedAt = f.fl.stamp()
				out := clone((*lists)[i])
				return &out, nil
			}
		}
	}
	return nil, &upgrade.Error{Category: upgrade.CategoryNotFound, Status: 500, Message: "No existing " + string(kind) + " record found"}
}

func (f *fakeAPI) DeleteFlagList(ctx context.Context, kind upgrade.ListKind, listID string) (*upgrade.SegmentRecord, error) {
	if err := f.enter("DeleteFlagList"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.fl.flags {
		lists := f.listsOf(fl, kind)
		for i := range *lists {
			if (*lists)[i].SegmentID == listID {
				rec := (*lists)[i].Segment
				*lists = slices.Delete(*lists, i, i+1)
				return rec, nil
			}
		}
	}
	return nil, &upgrade.Error{Category: upgrade.CategoryNotFound, Status: 500, Message: "Segment with ID " + listID + " not found for " + string(kind)}
}

func (f *fakeAPI) Segments(ctx context.Context) (*upgrade.SegmentsAnswer, error) {
	if err := f.enter("Segments"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &upgrade.SegmentsAnswer{Segments: []upgrade.SegmentRecord{}}
	for _, id := range f.fl.segOrder {
		if s, ok := f.fl.segs[id]; ok {
			out.Segments = append(out.Segments, clone(*s))
		}
	}
	for _, id := range f.fl.order {
		fl, ok := f.fl.flags[id]
		if !ok {
			continue
		}
		owner := &upgrade.FlagUsageOwner{ID: fl.ID, Name: fl.Name, Key: fl.Key, Status: fl.Status, Context: fl.Context}
		for _, l := range fl.Inclusion {
			row := clone(l)
			row.FeatureFlag = owner
			out.FlagInclusion = append(out.FlagInclusion, row)
		}
		for _, l := range fl.Exclusion {
			row := clone(l)
			row.FeatureFlag = owner
			out.FlagExclusion = append(out.FlagExclusion, row)
		}
	}
	out.ExperimentInclusion = clone(f.fl.expRows)
	return out, nil
}

func (f *fakeAPI) Segment(ctx context.Context, id string) (*upgrade.SegmentRecord, error) {
	if err := f.enter("Segment"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.fl.segs[id]
	if !ok {
		return nil, segNotFound(id)
	}
	out := clone(*s)
	return &out, nil
}

func (f *fakeAPI) UpsertSegment(ctx context.Context, in upgrade.SegmentInput) (*upgrade.SegmentRecord, error) {
	if err := f.enter("UpsertSegment"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.fl.segs {
		if s.ID != in.ID && s.Name == in.Name && s.Context == in.Context {
			return nil, &upgrade.Error{Category: upgrade.CategoryValidation, Status: 400, Message: fmt.Sprintf("Segment name %s already exists in context %s", in.Name, in.Context)}
		}
	}
	if in.ID == "" {
		in.ID = f.fl.newID()
	}
	out := clone(*f.fl.putSegment(f.fl.recordOf(in, upgrade.SegmentPublic)))
	return &out, nil
}

func (f *fakeAPI) DeleteSegment(ctx context.Context, id string) (*upgrade.SegmentRecord, error) {
	if err := f.enter("DeleteSegment"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.fl.segs[id]
	if !ok {
		return nil, segNotFound(id)
	}
	delete(f.fl.segs, id)
	drop := func(subs []upgrade.SegmentRecord) []upgrade.SegmentRecord {
		return slices.DeleteFunc(subs, func(r upgrade.SegmentRecord) bool { return r.ID == id })
	}
	for _, p := range f.fl.segs {
		p.SubSegments = drop(p.SubSegments)
	}
	for _, fl := range f.fl.flags {
		for _, ls := range [][]upgrade.FlagList{fl.Inclusion, fl.Exclusion} {
			for i := range ls {
				if ls[i].Segment != nil {
					ls[i].Segment.SubSegments = drop(ls[i].Segment.SubSegments)
				}
			}
		}
	}
	return s, nil
}
