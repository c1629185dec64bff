package pgstore

import "fmt"

// GrantStatements are the GRANTs of the least-privilege role of
// docs/teams.md, for a role that exists: full rights on the session, lock
// and job tables, SELECT and INSERT only on the audit trail. The schema is made by
// its owner (any upgrade-agent command run once with the owner's URL).
func GrantStatements(role string) []string {
	r := quoteIdent(role)
	return []string{
		"GRANT SELECT ON upgrade_agent_schema TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON upgrade_agent_sessions, upgrade_agent_history, upgrade_agent_jobs, upgrade_agent_locks TO " + r,
		"GRANT SELECT, INSERT ON upgrade_agent_audit TO " + r,
		"GRANT USAGE ON SEQUENCE upgrade_agent_audit_n_seq TO " + r,
	}
}

func quoteIdent(s string) string {
	return fmt.Sprintf("%q", s)
}
