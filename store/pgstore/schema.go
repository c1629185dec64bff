package pgstore

// schemaV2 adds the session leases (fencing, docs/teams.md) and chains the
// audit trail. The trigger, not the client, fills in n, at, db_user, prev
// and hash: an INSERT by the app role cannot backdate an entry or place it
// anywhere but at the end, and a row changed or removed later by a role
// that may do so breaks the chain that `audit verify` walks.
const schemaV2 = `
CREATE TABLE upgrade_agent_locks (
	session_id text PRIMARY KEY,
	token bigint NOT NULL,
	holder text NOT NULL DEFAULT '',
	lease_until timestamptz
);
-- n is numbered by the trigger, under the chain's lock: numbers follow the
-- order of the chain.
ALTER TABLE upgrade_agent_audit ALTER COLUMN n DROP DEFAULT;
ALTER TABLE upgrade_agent_audit ADD COLUMN prev text NOT NULL DEFAULT '';
ALTER TABLE upgrade_agent_audit ADD COLUMN hash text NOT NULL DEFAULT '';
CREATE OR REPLACE FUNCTION upgrade_agent_audit_hash(prev text, n bigint, at timestamptz, db_user text, entry jsonb) RETURNS text
	LANGUAGE sql STABLE AS $$
	SELECT encode(sha256(convert_to(prev || '|' || n::text || '|' || ((extract(epoch FROM at) * 1000000)::bigint)::text
		|| '|' || db_user || '|' || entry::text, 'UTF8')), 'hex')
$$;
DO $$
DECLARE
	r record;
	last text := '';
BEGIN
	FOR r IN SELECT n, at, db_user, entry FROM upgrade_agent_audit ORDER BY n LOOP
		UPDATE upgrade_agent_audit SET prev = last, hash = upgrade_agent_audit_hash(last, r.n, r.at, r.db_user, r.entry)
			WHERE n = r.n RETURNING hash INTO last;
	END LOOP;
END $$;
CREATE OR REPLACE FUNCTION upgrade_agent_audit_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	last text;
BEGIN
	-- The chain's lock ("upgraudi"): inserts from every machine take it in
	-- turn, so each entry names the one committed before it.
	PERFORM pg_advisory_xact_lock(8462377440788178025);
	NEW.n := nextval(format('%I.%I', TG_TABLE_SCHEMA, 'upgrade_agent_audit_n_seq'));
	NEW.at := clock_timestamp();
	NEW.db_user := session_user;
	EXECUTE format('SELECT hash FROM %I.%I ORDER BY n DESC LIMIT 1', TG_TABLE_SCHEMA, TG_TABLE_NAME) INTO last;
	NEW.prev := coalesce(last, '');
	NEW.hash := upgrade_agent_audit_hash(NEW.prev, NEW.n, NEW.at, NEW.db_user, NEW.entry);
	RETURN NEW;
END $$;
`
