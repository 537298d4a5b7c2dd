-- leasestore schema version 8 for PostgreSQL: a prune claims its request id.
--
-- A prune removes records in batches, a transaction each, and writes its
-- own record (namespace '', its request id) with the last. Two prunes
-- with one request id at once (a client retrying a prune that timed out
-- while the first still ran) both found the id unused, both removed
-- records, and the one that came second to its last batch failed on the
-- id's unique constraint, answering invalid although it had removed
-- records that no record counted. Now each batch of a prune, in its
-- transaction, claims the request id in leasestore_audit_prune_claim
-- (the row of the id, naming the prune's run), before it removes
-- anything: a batch of another run, or of a prune whose id is in the
-- trail, finds it taken and removes nothing; the last batch deletes the
-- claim with the record it writes, and a prune that stops early (its
-- context ended, an error) deletes it in a transaction of its own, so
-- that the prune can be sent again with its id. A claim left by a prune
-- that could not delete it (its process died, the server went away) keeps
-- that id refused as used; a prune with another id goes on. The row says
-- who pruned, before which time and when the claim was taken; the
-- schema's owner may delete it to free the id.
--
-- The claim is not an audit record: the trail is append-only, and a row
-- there could not be deleted without raising the mark of what prunes
-- removed (migration 7) past records followers have not read.
--
-- Both functions are SECURITY DEFINER (search_path pinned to this schema),
-- so a role granted the tables before this version prunes as before
-- without a grant on the new table, executable only by the roles that may
-- prune (see the REVOKE below), and each refuses unless the calling
-- transaction has the prune window open (a row of leasestore_audit_prune).
-- Only a role that may prune (DELETE on leasestore_audit) may write that
-- row: a trigger of its own checks the writing role, since a role that
-- only serves is commonly granted INSERT and UPDATE on every table of the
-- schema, the window's too, and could otherwise open the window and take
-- or free a prune's request id. So no other role can. A release before this version serves this
-- schema unchanged (leasestore_compat stays as it is); its prunes neither
-- take nor honour claims, so during a rolling deploy two prunes with one
-- request id, one of each release, can still both remove records.

-- +goose Up
CREATE TABLE leasestore_audit_prune_claim (
    request_id text        COLLATE "C" PRIMARY KEY,
    run        text        NOT NULL,
    actor      text        NOT NULL,
    before     timestamptz NOT NULL,
    at         timestamptz NOT NULL
);

-- Claims p_request_id for the prune run p_run, unless the trail holds the
-- prune record of that id or another run holds it. Returns the run that
-- holds it afterwards: p_run when this run does; NULL when the id's
-- record is in the trail.
-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_prune_claim(p_request_id text, p_run text, p_actor text, p_before timestamptz,
                                             p_at timestamptz) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    holder text;
BEGIN
    IF NOT EXISTS (SELECT FROM leasestore_audit_prune WHERE id = 1) THEN
        RAISE EXCEPTION 'leasestore_audit_prune_claim: only a prune''s batch (its window open) claims a request id'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT FROM leasestore_audit WHERE namespace = '' AND request_id = p_request_id) THEN
        RETURN NULL;
    END IF;
    INSERT INTO leasestore_audit_prune_claim (request_id, run, actor, before, at)
    VALUES (p_request_id, p_run, p_actor, p_before, p_at)
    ON CONFLICT (request_id) DO NOTHING;
    SELECT c.run INTO holder FROM leasestore_audit_prune_claim c WHERE c.request_id = p_request_id;
    RETURN holder;
END;
$$;
-- +goose StatementEnd

-- Deletes the claim of p_request_id if the run p_run holds it; returns
-- whether it did.
-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_prune_unclaim(p_request_id text, p_run text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM leasestore_audit_prune WHERE id = 1) THEN
        RAISE EXCEPTION 'leasestore_audit_prune_unclaim: only a prune''s batch (its window open) frees a request id'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    DELETE FROM leasestore_audit_prune_claim WHERE request_id = p_request_id AND run = p_run;
    RETURN FOUND;
END;
$$;
-- +goose StatementEnd

-- Refuses a write of the prune window by a role that may not delete audit
-- records. SECURITY INVOKER (the default): current_user is the role that
-- writes the row.
-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_prune_window_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT has_table_privilege(current_user, format('%I.leasestore_audit', TG_TABLE_SCHEMA), 'DELETE') THEN
        -- The server's own wording for the privilege that is missing, so
        -- that the backend names its GRANT as for any other.
        RAISE EXCEPTION 'permission denied for table leasestore_audit'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Only a role that may delete audit records opens the prune window (leasestore_audit_prune).';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER leasestore_audit_prune_window_guard BEFORE INSERT OR UPDATE ON leasestore_audit_prune
    FOR EACH ROW EXECUTE FUNCTION leasestore_audit_prune_window_guard();
-- Also in a session whose session_replication_role is replica.
ALTER TABLE leasestore_audit_prune ENABLE ALWAYS TRIGGER leasestore_audit_prune_window_guard;

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION leasestore_audit_prune_claim(text, text, text, timestamptz, timestamptz) SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION leasestore_audit_prune_unclaim(text, text) SET search_path = %I, pg_temp', current_schema());
    -- The guard and the trail's append-only trigger (schema 2) run as the
    -- writing role, and named the prune window and pg_catalog's functions
    -- through that role's search_path: a role could put a temporary
    -- leasestore_audit_prune of its own (temporary tables are searched
    -- first) or a has_table_privilege of its own ahead of them, and
    -- delete any record or open the window past the guard
    -- (TestAppendOnlyTrailRefusesADeleteThroughATemporaryWindow,
    -- TestServingRoleCannotOpenThePruneWindowThroughItsSearchPath). Pinned, pg_temp
    -- last and pg_catalog implicitly first, they find this schema's.
    EXECUTE format('ALTER FUNCTION leasestore_audit_prune_window_guard() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION leasestore_audit_refuse() SET search_path = %I, pg_temp', current_schema());
END $$;
-- +goose StatementEnd

-- PostgreSQL lets PUBLIC execute a new function, and these two run as the
-- schema's owner: kept out only by their check of the window, any role
-- that can reach the schema could take or free a prune's request id
-- while a row of the window is committed (a DBA's by hand). Only the
-- roles that may prune execute them: those that hold DELETE on the trail
-- now (and their members, PUBLIC if it is granted to PUBLIC) get EXECUTE
-- here, so a role granted the tables before this version prunes as
-- before; a role given DELETE on the trail later needs the GRANT that
-- docs/postgres-settings.md names (a prune without it names it too).
REVOKE EXECUTE ON FUNCTION leasestore_audit_prune_claim(text, text, text, timestamptz, timestamptz),
    leasestore_audit_prune_unclaim(text, text) FROM PUBLIC;
-- +goose StatementBegin
DO $$
DECLARE
    g oid;
BEGIN
    FOR g IN SELECT DISTINCT a.grantee
             FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
             WHERE c.oid = 'leasestore_audit'::regclass AND a.privilege_type = 'DELETE' AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION leasestore_audit_prune_claim(text, text, text, timestamptz, timestamptz), '
                       'leasestore_audit_prune_unclaim(text, text) TO %s',
                       CASE WHEN g = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(g)) END);
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER FUNCTION leasestore_audit_refuse() RESET search_path;
DROP TRIGGER leasestore_audit_prune_window_guard ON leasestore_audit_prune;
DROP FUNCTION leasestore_audit_prune_window_guard();
DROP FUNCTION leasestore_audit_prune_unclaim(text, text);
DROP FUNCTION leasestore_audit_prune_claim(text, text, text, timestamptz, timestamptz);
DROP TABLE leasestore_audit_prune_claim;
