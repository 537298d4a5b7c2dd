-- leasestore schema version 11 for PostgreSQL: how many prunes, beside
-- how far.
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
-- leasestore_audit_pruned now also counts, per namespace (the row of
-- namespace '' for the whole trail), the prune batches that removed its
-- records: the statement trigger adds one to each row it writes, once per
-- DELETE. A follower's cursor issued below the greatest id pruned carries
-- the count read in its page's snapshot, and a read from it is refused
-- only when a batch has removed records since (the count differs); a
-- cursor without one keeps the rule of migration 7. The read statements
-- read both through leasestore_audit_pruned_mark, SECURITY DEFINER and
-- executable by whoever may execute leasestore_audit_pruned_through (the
-- grants are copied: PUBLIC by default), which stays as it was: a release
-- before this version serves this schema unchanged (leasestore_compat
-- stays as it is), and the trigger counts its prunes too. Prunes made
-- before this version were not counted: a cursor issued below them
-- carries a count of 0, refused at the next prune. Down drops the count
-- and the function, and restores the trigger of migration 7.

-- +goose Up
ALTER TABLE leasestore_audit_pruned ADD COLUMN prunes bigint NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_audit_keep_pruned() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF TG_RELID <> 'leasestore_audit'::regclass THEN
        RETURN NULL; -- attached to another table: it marks nothing
    END IF;
    INSERT INTO leasestore_audit_pruned AS p (namespace, through, prunes)
    SELECT g.namespace, max(g.id), 1 FROM leasestore_audit_gone g WHERE g.namespace <> '' GROUP BY g.namespace
    UNION ALL
    SELECT '', max(g.id), 1 FROM leasestore_audit_gone g HAVING count(*) > 0
    ON CONFLICT (namespace) DO UPDATE SET through = greatest(p.through, excluded.through), prunes = p.prunes + 1;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_pruned_mark(p_namespace text, OUT through bigint, OUT prunes bigint)
STABLE LANGUAGE sql SECURITY DEFINER AS $$
    SELECT coalesce(max(p.through), 0), coalesce(max(p.prunes), 0) FROM leasestore_audit_pruned p WHERE p.namespace = p_namespace
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

ALTER TABLE leasestore_audit_pruned DROP COLUMN prunes;
