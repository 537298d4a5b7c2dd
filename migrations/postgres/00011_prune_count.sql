-- leasestore schema version 11 for PostgreSQL: which prune batch last
-- removed records, beside how far.
--
-- A follower reads only below the horizon, the oldest transaction in
-- progress in the cluster. One that started after a prune, while any
-- transaction older than the pruned records was still open (another
-- application's session idle in transaction), got its first cursor (its
-- first page's, or audit.Tail's) at the horizon, below the greatest id
-- the prune removed (migration 7), and its next read failed "behind a
-- prune" although it had missed nothing: the records were gone before it
-- first read. Raising its cursor to that id would skip the records that
-- transactions in flight at the prune commit later with lower ids.
--
-- leasestore_audit_pruned now also keeps, per namespace (the row of
-- namespace '' for the whole trail, which every batch that removes
-- anything writes), pruned_by: the id of the last prune batch that
-- removed its records, its transaction id as an audit id (plus the era's
-- offset, as a record's id), set by the statement trigger once per
-- DELETE. It never repeats: a later batch, in this era or a later one
-- (a restore into another cluster), or after this migration went down
-- and up again, has a greater id. A follower's cursor issued below the
-- greatest id pruned in its namespace carries the whole trail's
-- pruned_by read in its page's snapshot (whatever the read's namespace,
-- so that a cursor handed to a read of another scope never matches a
-- prune it did not see), and a read from it is refused only when a batch
-- has removed records anywhere since (the value differs); a cursor
-- without one keeps the rule of migration 7. The read statements read
-- both through leasestore_audit_pruned_mark (the namespace's through,
-- the whole trail's pruned_by), SECURITY DEFINER and executable by
-- exactly whoever may execute leasestore_audit_pruned_through (PUBLIC's
-- EXECUTE is revoked, then that function's grants are copied: PUBLIC
-- again by default), which stays as it was: a release before this
-- version serves this schema unchanged (leasestore_compat stays as it
-- is), and the trigger marks its prunes too. Prunes made before this
-- version left pruned_by 0: a cursor issued below them carries 0,
-- refused at the next prune. Down drops pruned_by and the function, and
-- restores the trigger of migration 7.

-- +goose Up
ALTER TABLE leasestore_audit_pruned ADD COLUMN pruned_by bigint NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_audit_keep_pruned() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    batch bigint;
BEGIN
    IF TG_RELID <> 'leasestore_audit'::regclass THEN
        RETURN NULL; -- attached to another table: it marks nothing
    END IF;
    -- This batch's id: its transaction id as an audit id, as a record's.
    -- Without the era's row (no record can be written then) a row's value
    -- still moves on: greatest(...) takes one more than it was.
    SELECT pg_current_xact_id()::text::bigint + e.id_offset INTO batch FROM leasestore_audit_era e;
    INSERT INTO leasestore_audit_pruned AS p (namespace, through, pruned_by)
    SELECT g.namespace, max(g.id), coalesce(batch, 1) FROM leasestore_audit_gone g WHERE g.namespace <> '' GROUP BY g.namespace
    UNION ALL
    SELECT '', max(g.id), coalesce(batch, 1) FROM leasestore_audit_gone g HAVING count(*) > 0
    ON CONFLICT (namespace) DO UPDATE SET through = greatest(p.through, excluded.through),
                                          pruned_by = greatest(p.pruned_by + 1, batch);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- through: how far prunes removed p_namespace's records ('' the whole
-- trail's); pruned_by: the whole trail's last batch, whatever p_namespace.
CREATE FUNCTION leasestore_audit_pruned_mark(p_namespace text, OUT through bigint, OUT pruned_by bigint)
STABLE LANGUAGE sql SECURITY DEFINER AS $$
    SELECT coalesce((SELECT p.through FROM leasestore_audit_pruned p WHERE p.namespace = p_namespace), 0),
           coalesce((SELECT p.pruned_by FROM leasestore_audit_pruned p WHERE p.namespace = ''), 0)
$$;
-- +goose StatementEnd

-- CREATE OR REPLACE resets a function's settings: pin both again.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION leasestore_audit_keep_pruned() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION leasestore_audit_pruned_mark(text) SET search_path = %I, pg_temp', current_schema());
END $$;
-- +goose StatementEnd

-- PostgreSQL lets PUBLIC execute a new function: take that back, then
-- give it to whoever may execute leasestore_audit_pruned_through.
REVOKE EXECUTE ON FUNCTION leasestore_audit_pruned_mark(text) FROM PUBLIC;

-- +goose StatementBegin
DO $$
DECLARE
    g oid;
BEGIN
    FOR g IN SELECT DISTINCT a.grantee
             FROM pg_catalog.pg_proc p,
                  pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
             WHERE p.oid = 'leasestore_audit_pruned_through(text)'::regprocedure
               AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION leasestore_audit_pruned_mark(text) TO %s',
                       CASE WHEN g = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(g)) END);
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION leasestore_audit_pruned_mark(text);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_audit_keep_pruned() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF TG_RELID <> 'leasestore_audit'::regclass THEN
        RETURN NULL; -- attached to another table: it marks nothing
    END IF;
    INSERT INTO leasestore_audit_pruned AS p (namespace, through)
    SELECT g.namespace, max(g.id) FROM leasestore_audit_gone g WHERE g.namespace <> '' GROUP BY g.namespace
    UNION ALL
    SELECT '', max(g.id) FROM leasestore_audit_gone g HAVING count(*) > 0
    ON CONFLICT (namespace) DO UPDATE SET through = greatest(p.through, excluded.through);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION leasestore_audit_keep_pruned() SET search_path = %I, pg_temp', current_schema());
END $$;
-- +goose StatementEnd

ALTER TABLE leasestore_audit_pruned DROP COLUMN pruned_by;
