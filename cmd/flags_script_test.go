package cmd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
)

// Script commands that arrange flags and segments in the embedded
// simulator through its REST API (flags.txtar, segments.txtar).
func init() {
	// mkflag KEY CONTEXT [STATUS [FILTER [NAME]]] creates a flag, named
	// after its key unless NAME is given ("MATH_HINTS" -> "Math hints").
	scriptCmds["mkflag"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 || len(args) > 5 {
			ts.Fatalf("usage: mkflag KEY CONTEXT [STATUS [FILTER [NAME]]]")
		}
		f := &upgrade.FeatureFlag{Key: args[0], Name: flagName(args[0]), Context: []string{args[1]},
			Status: upgrade.FlagEnabled, FilterMode: upgrade.FilterExcludeAll, Tags: []string{}}
		if len(args) > 2 {
			f.Status = args[2]
		}
		if len(args) > 3 {
			f.FilterMode = args[3]
		}
		if len(args) > 4 {
			f.Name = args[4]
		}
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			_, err := c.CreateFlag(ctx, f)
			return err
		})
	}
	// mkseg NAME CONTEXT MEMBER... creates a public segment; a member is
	// u:USER, g:TYPE=ID or s:SEGMENT-NAME.
	scriptCmds["mkseg"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 {
			ts.Fatalf("usage: mkseg NAME CONTEXT MEMBER...")
		}
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			in := upgrade.SegmentInput{Name: args[0], Context: args[1], Type: upgrade.SegmentPublic}
			if err := scriptMembers(ctx, c, &in, args[2:]); err != nil {
				return err
			}
			_, err := c.UpsertSegment(ctx, in)
			return err
		})
	}
	// flaglist KEY include|exclude on|off MEMBER... adds a list to the flag.
	scriptCmds["flaglist"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 3 {
			ts.Fatalf("usage: flaglist KEY include|exclude on|off MEMBER...")
		}
		kind := upgrade.ListInclusion
		if args[1] == "exclude" {
			kind = upgrade.ListExclusion
		}
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			f, err := scriptFlag(ctx, c, args[0])
			if err != nil {
				return err
			}
			in := upgrade.FlagListInput{FlagID: f.ID, Enabled: args[2] == "on", ListType: "Individual",
				Segment: upgrade.SegmentInput{Name: args[1] + " list", Context: f.ContextName(), Type: upgrade.SegmentPrivate}}
			if err := scriptMembers(ctx, c, &in.Segment, args[3:]); err != nil {
				return err
			}
			_, err = c.AddFlagList(ctx, kind, in)
			return err
		})
	}
	// featureflag USER CONTEXT [TYPE=ID...] asks the client API, as an
	// app would (this records exposures), and prints the keys served.
	scriptCmds["featureflag"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 {
			ts.Fatalf("usage: featureflag USER CONTEXT [TYPE=ID...]")
		}
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			groups := map[string][]string{}
			for _, a := range args[2:] {
				g, err := flageval.ParseGroup(a)
				if err != nil {
					return err
				}
				groups[g.Type] = append(groups[g.Type], g.GroupID)
			}
			no := false
			keys, err := c.FeatureFlagKeys(ctx, args[0], upgrade.FeatureFlagRequest{Context: args[1], GroupsForSession: groups, IncludeStoredUserGroups: &no})
			if err != nil {
				return err
			}
			fmt.Fprintf(ts.Stdout(), "served: %s\n", strings.Join(keys, " "))
			return nil
		})
	}
	// exposures KEY N checks the exposures of the flags with that key.
	scriptCmds["exposures"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: exposures KEY N")
		}
		want, err := strconv.Atoi(args[1])
		ts.Check(err)
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			page, err := c.FlagsPage(ctx, upgrade.PageRequest{Take: 1000})
			if err != nil {
				return err
			}
			got, found := 0, false
			for _, n := range page.Nodes {
				if n.Key == args[0] && n.Exposures != nil {
					got, found = got+*n.Exposures, true
				}
			}
			if !found || got != want {
				return fmt.Errorf("flags with key %s: %d exposures (found: %v), want %d", args[0], got, found, want)
			}
			return nil
		})
	}
}

func flagName(key string) string {
	s := strings.ToLower(strings.ReplaceAll(key, "_", " "))
	return strings.ToUpper(s[:1]) + s[1:]
}

func scriptFlag(ctx context.Context, c *upgrade.Client, key string) (*upgrade.FeatureFlag, error) {
	flags, err := c.Flags(ctx)
	if err != nil {
		return nil, err
	}
	id, err := upgrade.ResolveFlag(flags, key)
	if err != nil {
		return nil, err
	}
	return c.Flag(ctx, id)
}

func scriptMembers(ctx context.Context, c *upgrade.Client, in *upgrade.SegmentInput, members []string) error {
	for _, m := range members {
		kind, val, ok := strings.Cut(m, ":")
		if !ok {
			return fmt.Errorf("member %q: write u:USER, g:TYPE=ID or s:SEGMENT", m)
		}
		switch kind {
		case "u":
			in.UserIDs = append(in.UserIDs, val)
		case "g":
			g, err := flageval.ParseGroup(val)
			if err != nil {
				return err
			}
			in.Groups = append(in.Groups, g)
		case "s":
			all, err := c.Segments(ctx)
			if err != nil {
				return err
			}
			id, err := upgrade.ResolveSegment(all.Segments, val)
			if err != nil {
				return err
			}
			in.SubSegmentIDs = append(in.SubSegmentIDs, id)
		default:
			return fmt.Errorf("member %q: write u:USER, g:TYPE=ID or s:SEGMENT", m)
		}
	}
	return nil
}
