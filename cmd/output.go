package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// The -o values each command supports. A command declares them with
// withOutputs; an explicit -o it does not support is exit 2, naming the
// ones it does. An output set in the config file is a default for every
// command, so a command that lacks it falls back to text instead.
//
//	text  tables and descriptions for people (tables fit $COLUMNS)
//	wide  the table with every column and no cell shortened
//	json  the documented shape (docs/json.md), indented
//	yaml  the same data as YAML
//	raw   the server's own object, as it sent it, in JSON
const annotationOutputs = "upgrade-agent/outputs"

// withOutputs declares the -o values c supports ("text" is implied).
func withOutputs(c *cobra.Command, formats ...string) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annotationOutputs] = strings.Join(append([]string{"text"}, formats...), ",")
	return c
}

// supportedOutputs are the -o values of c.
func supportedOutputs(c *cobra.Command) []string {
	if s := c.Annotations[annotationOutputs]; s != "" {
		return strings.Split(s, ",")
	}
	return []string{"text"}
}

// checkOutput applies the command's -o values to the resolved one.
func checkOutput(c *cobra.Command, o *GlobalOptions, explicit bool) error {
	if c.Name() == "help" || !c.Runnable() || c.HasSubCommands() {
		return nil
	}
	allowed := supportedOutputs(c)
	if oneOf(o.Output, allowed) {
		return nil
	}
	if !explicit {
		o.Output = "text"
		return nil
	}
	return &FlagError{Err: fmt.Errorf("%q does not support --output %s: use %s", c.CommandPath(), o.Output, strings.Join(allowed, ", ")), CmdPath: c.CommandPath()}
}
