package cmd

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// The views of flags, segments and experiment history: tables for people,
// the read model as JSON or YAML with -o json|yaml.

func isData(format string) bool { return format == "json" || format == "yaml" }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func renderFlags(format string, io *IOStreams, flags []readmodel.FlagSummary, filtered bool) error {
	if isData(format) {
		return WriteData(io.Out, format, flags)
	}
	if len(flags) == 0 {
		return noneFound(io.ErrOut, "feature flags", filtered)
	}
	// The key is the flag's name here: never cut. FILTER and UPDATED
	// are in -o wide, so the table fits 80 columns.
	t := Table{Columns: []Column{{Header: "KEY"}, {Header: "NAME", Shrink: true}, {Header: "ID"}, {Header: "CONTEXT", Shrink: true},
		{Header: "STATUS"}, {Header: "FILTER", Wide: true}, {Header: "INCLUDE"}, {Header: "EXCLUDE"}, {Header: "UPDATED", Wide: true}}}
	for _, f := range flags {
		t.Rows = append(t.Rows, []string{f.Key, f.Name, shortID(f.ID), strings.Join(f.Context, ","), f.Status, f.FilterMode,
			ratio(f.IncludeEnabled, f.IncludeTotal), ratio(f.ExcludeEnabled, f.ExcludeTotal), formatTime(f.UpdatedAt)})
	}
	return t.Write(io.Out, format, io.Width)
}

func noneFound(w io.Writer, what string, filtered bool) error {
	msg := "no " + what
	if filtered {
		msg += " match the filters"
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

func ratio(on, total int) string { return strconv.Itoa(on) + "/" + strconv.Itoa(total) }

func members(m readmodel.Members) string {
	var parts []string
	if len(m.Users) > 0 {
		parts = append(parts, "users "+list(m.Users))
	}
	if len(m.Groups) > 0 {
		gs := make([]string, len(m.Groups))
		for i, g := range m.Groups {
			gs[i] = g.String()
		}
		parts = append(parts, "groups "+list(gs))
	}
	if len(m.Segments) > 0 {
		ss := make([]string, len(m.Segments))
		for i, s := range m.Segments {
			ss[i] = strconv.Quote(s.Name)
		}
		parts = append(parts, "segments "+list(ss))
	}
	if len(parts) == 0 {
		return "nobody"
	}
	return strings.Join(parts, "; ")
}

func renderFlag(format string, io *IOStreams, d readmodel.FlagDetails) error {
	if isData(format) {
		return WriteData(io.Out, format, d)
	}
	if err := describe(io.Out, [][2]string{
		{"Key", d.Key},
		{"Name", d.Name},
		{"ID", d.ID},
		{"Context", list(d.Context)},
		{"Status", d.Status},
		{"Filter mode", d.FilterMode},
		{"Reaches", d.Reach},
		{"Description", d.Description},
		{"Tags", list(d.Tags)},
		{"Created", formatTime(d.CreatedAt)},
		{"Updated", formatTime(d.UpdatedAt)},
	}); err != nil {
		return err
	}
	lists := append(append([]readmodel.FlagList{}, d.Include...), d.Exclude...)
	if len(lists) == 0 {
		_, err := fmt.Fprintln(io.Out, "\nNo include or exclude lists.")
		return err
	}
	fmt.Fprintln(io.Out)
	rows := make([][]string, 0, len(lists))
	for _, l := range lists {
		on := "no"
		if l.Enabled {
			on = "yes"
		}
		rows = append(rows, []string{strings.ToUpper(l.Kind), shortID(l.ID), on, orDash(l.ListType), members(l.Members)})
	}
	return RenderTable(io.Out, []string{"LIST", "ID", "ENABLED", "TYPE", "MEMBERS"}, rows)
}

// explainOut is the -o json|yaml shape of "flags explain": flageval's
// result in the snake_case of every other command (docs/json.md).
type explainOut struct {
	Served          bool          `json:"served"`
	Rule            string        `json:"rule"`
	Match           *explainList  `json:"match,omitempty"`
	Flag            string        `json:"flag"`
	Context         string        `json:"context"`
	User            string        `json:"user"`
	InDisabledLists []explainList `json:"in_disabled_lists,omitempty"`
	Explanation     string        `json:"explanation"`
}

type explainList struct {
	Kind     string        `json:"kind,omitempty"`
	ListID   string        `json:"list_id"`
	ListName string        `json:"list_name"`
	ListType string        `json:"list_type,omitempty"`
	Enabled  bool          `json:"enabled"`
	Path     []string      `json:"path,omitempty"`
	User     string        `json:"user,omitempty"`
	Group    *explainGroup `json:"group,omitempty"`
}

type explainGroup struct {
	Type    string `json:"type"`
	GroupID string `json:"group_id"`
}

func explainListOf(m flageval.Match) explainList {
	l := explainList{Kind: string(m.Kind), ListID: m.ListID, ListName: m.ListName, ListType: m.ListType,
		Enabled: m.Enabled, Path: m.Path, User: m.User}
	if m.Group != nil {
		l.Group = &explainGroup{Type: m.Group.Type, GroupID: m.Group.GroupID}
	}
	return l
}

func explainOf(r flageval.Result) explainOut {
	out := explainOut{Served: r.Served, Rule: string(r.Rule), Flag: r.Flag, Context: r.Context, User: r.User, Explanation: r.Explanation}
	if r.Match != nil {
		m := explainListOf(*r.Match)
		out.Match = &m
	}
	for _, m := range r.InDisabledLists {
		out.InDisabledLists = append(out.InDisabledLists, explainListOf(m))
	}
	return out
}

func renderExplain(format string, io *IOStreams, r flageval.Result) error {
	if isData(format) {
		return WriteData(io.Out, format, explainOf(r))
	}
	served := "no"
	if r.Served {
		served = "yes"
	}
	return describe(io.Out, [][2]string{
		{"Flag", r.Flag},
		{"User", r.User},
		{"Context", r.Context},
		{"Served", served},
		{"Rule", string(r.Rule)},
		{"Why", r.Explanation},
	})
}

func renderSegments(format string, io *IOStreams, segs []readmodel.SegmentSummary, filtered bool) error {
	if isData(format) {
		return WriteData(io.Out, format, segs)
	}
	if len(segs) == 0 {
		return noneFound(io.ErrOut, "segments", filtered)
	}
	t := Table{Columns: []Column{{Header: "NAME"}, {Header: "ID"}, {Header: "CONTEXT", Shrink: true}, {Header: "USERS"},
		{Header: "GROUPS"}, {Header: "SEGMENTS"}, {Header: "USED BY", Shrink: true}, {Header: "UPDATED", Wide: true}}}
	for _, s := range segs {
		t.Rows = append(t.Rows, []string{s.Name, shortID(s.ID), s.Context, strconv.Itoa(s.Users), strconv.Itoa(s.Groups),
			strconv.Itoa(s.Segments), orDash(list(s.UsedBy)), formatTime(s.UpdatedAt)})
	}
	return t.Write(io.Out, format, io.Width)
}

func renderSegment(format string, io *IOStreams, d readmodel.SegmentDetails) error {
	if isData(format) {
		return WriteData(io.Out, format, d)
	}
	if err := describe(io.Out, [][2]string{
		{"Name", d.Name},
		{"ID", d.ID},
		{"Context", d.Context},
		{"Type", d.Type},
		{"Status", d.Status},
		{"Description", d.Description},
		{"Members", members(d.Members)},
		{"Tags", list(d.Tags)},
		{"Updated", formatTime(d.UpdatedAt)},
	}); err != nil {
		return err
	}
	if len(d.Uses) == 0 {
		_, err := fmt.Fprintln(io.Out, "\nNot used by any flag or experiment.")
		return err
	}
	fmt.Fprintln(io.Out)
	rows := make([][]string, 0, len(d.Uses))
	for _, u := range d.Uses {
		on := "yes"
		if !u.On {
			on = "no (list disabled)"
		}
		via := "-"
		if len(u.Via) > 0 {
			via = strings.Join(u.Via, " > ")
		}
		rows = append(rows, []string{strings.ToUpper(u.Kind), u.Name, u.State, u.List, on, via})
	}
	return RenderTable(io.Out, []string{"USED BY", "NAME", "STATE", "LIST", "ENABLED", "VIA"}, rows)
}

func renderHistory(format string, io *IOStreams, h readmodel.History) error {
	if isData(format) {
		return WriteData(io.Out, format, h)
	}
	if len(h.Changes) == 0 {
		_, err := fmt.Fprintf(io.ErrOut, "%s has never changed state (it is %s)\n", h.ExperimentName, h.Status)
		return err
	}
	return historyTable(io.Out, h)
}

// historyTable is the table of state changes, also shown by experiments show.
func historyTable(w io.Writer, h readmodel.History) error {
	rows := make([][]string, 0, len(h.Changes))
	for _, c := range h.Changes {
		rows = append(rows, []string{formatTime(c.Time), string(c.From), string(c.To)})
	}
	return RenderTable(w, []string{"TIME", "FROM", "TO"}, rows)
}
