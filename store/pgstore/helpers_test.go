package pgstore_test

import (
	"strings"

	"github.com/upgrade-agent/upgrade-agent/store/pgstore"
)

// LeastPrivilegeGrants creates role with a password and grants it what
// docs/teams.md lists.
func LeastPrivilegeGrants(role, password string) []string {
	return append([]string{"CREATE ROLE " + role + " LOGIN PASSWORD '" + strings.ReplaceAll(password, "'", "''") + "'"},
		pgstore.GrantStatements(role)...)
}
