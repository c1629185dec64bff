package cmd

import (
	"context"
	"encoding/csv"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// NewCmdStratification builds the "stratification" group.
func NewCmdStratification(f *Factory) *cobra.Command {
	c := groupCmd("stratification", "List, show, upload and delete stratification factors")
	c.Aliases = []string{"strata"}
	c.Example = `  upgrade-agent stratification list
  upgrade-agent stratification show prior`
	c.AddCommand(NewCmdStratificationList(f), NewCmdStratificationShow(f), NewCmdStratificationUpload(f), NewCmdStratificationRm(f))
	return c
}

// StratificationFactorInfo is one factor as the stratification commands
// show it (docs/json.md).
type StratificationFactorInfo struct {
	Name        string         `json:"name"`
	Users       int            `json:"users"`
	Values      map[string]int `json:"values"`
	Experiments []string       `json:"experiments"`
}

// stratInfos reads the factors with the experiments named.
func stratInfos(ctx context.Context, client *upgrade.Client) ([]StratificationFactorInfo, error) {
	all, err := client.StratificationFactors(ctx)
	if err != nil {
		return nil, err
	}
	names, err := client.ExperimentNames(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]string{}
	for _, n := range names {
		byID[n.ID] = n.Name
	}
	out := make([]StratificationFactorInfo, len(all))
	for i, f := range all {
		info := StratificationFactorInfo{Name: f.Factor, Users: f.Users(), Values: f.FactorValue, Experiments: []string{}}
		if info.Values == nil {
			info.Values = map[string]int{}
		}
		for _, id := range f.ExperimentIDs {
			name := byID[id]
			if name == "" {
				name = id
			}
			info.Experiments = append(info.Experiments, name)
		}
		out[i] = info
	}
	return out, nil
}

func fmtValueCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// NewCmdStratificationList builds "stratification list".
func NewCmdStratificationList(f *Factory) *cobra.Command {
	return withOutputs(&cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List stratification factors with their value counts",
		Example: `  upgrade-agent stratification list -o json`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, done, err := f.Upgrade(c.Context())
			if err != nil {
				return err
			}
			defer done()
			infos, err := stratInfos(c.Context(), client)
			if err != nil {
				return err
			}
			format := f.opts().Output
			if isData(format) {
				return WriteData(f.IO.Out, format, infos)
			}
			if len(infos) == 0 {
				return noneFound(f.IO.ErrOut, "stratification factors", false)
			}
			t := Table{Columns: []Column{{Header: "FACTOR"}, {Header: "USERS"}, {Header: "VALUES", Shrink: true}, {Header: "USED BY", Shrink: true}}}
			for _, i := range infos {
				t.Rows = append(t.Rows, []string{i.Name, strconv.Itoa(i.Users), fmtValueCounts(i.Values), orDash(list(i.Experiments))})
			}
			return t.Write(f.IO.Out, format, f.IO.Width)
		},
	}, "wide", "json", "yaml")
}

// NewCmdStratificationShow builds "stratification show FACTOR".
func NewCmdStratificationShow(f *Factory) *cobra.Command {
	return withOutputs(&cobra.Command{
		Use:     "show FACTOR",
		Short:   "Show a factor's value counts and the experiments using it",
		Example: `  upgrade-agent stratification show prior`,
		Args:    exactArgs("FACTOR"),
		RunE: func(c *cobra.Command, args []string) error {
			client, done, err := f.Upgrade(c.Context())
			if err != nil {
				return err
			}
			defer done()
			infos, err := stratInfos(c.Context(), client)
			if err != nil {
				return err
			}
			var names []string
			for _, i := range infos {
				if i.Name != args[0] {
					names = append(names, i.Name)
					continue
				}
				if format := f.opts().Output; isData(format) {
					return WriteData(f.IO.Out, format, i)
				}
				return describe(f.IO.Out, [][2]string{
					{"Factor", i.Name},
					{"Users", strconv.Itoa(i.Users)},
					{"Values", fmtValueCounts(i.Values)},
					{"Used by", orDash(list(i.Experiments))},
				})
			}
			return &UsageError{Err: fmt.Errorf("no stratification factor %q (factors: %s)", args[0], orDash(list(names)))}
		},
	}, "json", "yaml")
}

// NewCmdStratificationUpload builds "stratification upload FILE.csv".
func NewCmdStratificationUpload(f *Factory) *cobra.Command {
	o := &ProposeOptions{}
	c := &cobra.Command{
		Use:   "upload FILE.csv",
		Short: "Upload users' values of a factor, through a confirmation",
		Long: `Upload users' values of a stratification factor from a CSV file in UpGrade's
format: a header "uuid,FACTOR" and one "user,value" line per user. The upload
is proposed as create_stratification_factor in a new session: exit 10 until
"upgrade-agent resume SESSION --answer yes" (or --yes). A user uploaded again
gets the new value.`,
		Example: `  upgrade-agent stratification upload prior.csv --yes`,
		Args:    exactArgs("FILE.csv"),
		RunE: func(c *cobra.Command, args []string) error {
			o.confirmSet = c.Flags().Changed("confirm")
			p, err := readStratCSV(args[0])
			if err != nil {
				return err
			}
			return runProposal(c.Context(), f, o, "upload "+filepath.Base(args[0]), actions.CreateStratificationFactor, p)
		},
	}
	addProposeFlags(c, o)
	return withOutputs(c, "json")
}

// readStratCSV reads a factor's CSV into the action's params; an error
// names the file and line.
func readStratCSV(path string) (actions.CreateStratificationFactorParams, error) {
	var p actions.CreateStratificationFactorParams
	data, err := safefile.ReadFile(path, 16<<20)
	if err != nil {
		return p, &UsageError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	r := csv.NewReader(strings.NewReader(string(data)))
	r.FieldsPerRecord = -1
	lines, err := r.ReadAll()
	if err != nil {
		return p, &UsageError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	if len(lines) == 0 || len(lines[0]) != 2 || strings.TrimSpace(lines[0][0]) != "uuid" {
		return p, Usagef("%s:1: the header must be uuid,FACTOR (one factor per file)", path)
	}
	p.Name = strings.TrimSpace(lines[0][1])
	for i, l := range lines[1:] {
		if len(l) != 2 {
			return p, Usagef("%s:%d: want user,value; got %d fields", path, i+2, len(l))
		}
		p.Values = append(p.Values, actions.StratValueParam{UserID: l[0], Value: l[1]})
	}
	return p, nil
}

// NewCmdStratificationRm builds "stratification rm FACTOR".
func NewCmdStratificationRm(f *Factory) *cobra.Command {
	o := &ProposeOptions{}
	c := &cobra.Command{
		Use:     "rm FACTOR",
		Aliases: []string{"delete"},
		Short:   "Delete a factor no experiment uses, through a confirmation",
		Example: `  upgrade-agent stratification rm prior --yes`,
		Args:    exactArgs("FACTOR"),
		RunE: func(c *cobra.Command, args []string) error {
			o.confirmSet = c.Flags().Changed("confirm")
			return runProposal(c.Context(), f, o, "delete stratification factor "+args[0], actions.DeleteStratificationFactor,
				actions.DeleteStratificationFactorParams{Name: args[0]})
		},
	}
	addProposeFlags(c, o)
	return withOutputs(c, "json")
}
