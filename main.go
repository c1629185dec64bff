// Command upgrade-agent is an LLM agent for the UpGrade A/B-testing
// platform; see the cmd package and spec/cli.md.
package main

import (
	"os"

	"github.com/upgrade-agent/upgrade-agent/cmd"
)

func main() { os.Exit(cmd.Execute()) }
