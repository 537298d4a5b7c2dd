-- leasestore schema version 9 for PostgreSQL: the outcome of a change that
-- met a later one, read in the newest committed state.
--
-- A state-changing statement judges its key in the snapshot taken when it
-- starts, then takes the key's writer lock and writes (INSERT ... ON
-- CONFLICT, UPDATE), which re-checks its condition on the row's newest
-- version (read committed). When another writer's change of the key
-- committed in between, the write meets it and changes nothing, while the
-- snapshot does not show it: leasestore_outcome, STABLE, reads that
-- snapshot, where the key looked free to the acquire that could not take
-- it and the lease live to the renew that could not extend it. The backend
-- then sent the statement again, a second round trip, which every waiter
-- but the first paid when one release woke several.
--
-- leasestore_outcome_fresh answers the same question from the newest
-- committed state. It is VOLATILE: under read committed each query of a
-- VOLATILE function takes a snapshot of its own, which shows every change
-- committed before it, the one the write met included (it committed
-- before the statement was granted the key's lock, which the statement
-- holds until it commits, so no writer of the key commits in between). It
-- calls leasestore_outcome in one query, so the request id's record and
-- the key's row are read in one snapshot, and the two cannot drift apart.
-- It is PL/pgSQL on purpose: the planner may inline a SQL function into
-- the calling statement, which would read that statement's snapshot
-- again. The statements call it only when their write met a later change
-- (acquire: a token was drawn and no row came back; renew, release,
-- revoke: the snapshot's row met the condition the write refused); every
-- other refusal and replay is still read in the statement's snapshot.
-- Under repeatable read or serializable (a pool a caller lends) its
-- snapshot is the transaction's, but there the write fails to serialize
-- instead, and the statement runs again, as before.
--
-- Whoever may execute leasestore_outcome may execute it (the grants are
-- copied: PUBLIC by default, the roles named where a DBA's default
-- privileges revoke PUBLIC's), so a role that serves schema 8 serves 9.
-- A release before this version serves this schema unchanged
-- (leasestore_compat stays as it is): it never calls the function, and
-- sends its statement again in that case, as before. Down drops it; a
-- release of this version then refuses the schema, naming both versions,
-- as it refuses any older one.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION leasestore_outcome_fresh(p_namespace text, p_name text, p_request_id text) RETURNS json
VOLATILE LANGUAGE plpgsql AS $$
DECLARE
    r json;
BEGIN
    SELECT leasestore_outcome(p_namespace, p_name, p_request_id) INTO r;
    RETURN r;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    g oid;
BEGIN
    FOR g IN SELECT DISTINCT a.grantee
             FROM pg_catalog.pg_proc p,
                  pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
             WHERE p.oid = 'leasestore_outcome(text, text, text)'::regprocedure
               AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION leasestore_outcome_fresh(text, text, text) TO %s',
                       CASE WHEN g = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(g)) END);
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION leasestore_outcome_fresh(text, text, text);
