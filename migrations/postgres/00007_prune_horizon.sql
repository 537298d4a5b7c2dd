-- leasestore schema version 7 for PostgreSQL: where prunes left gaps.
--
-- A reader paging the trail by cursor (a follower above all) reads the
-- records after its cursor's id. When `leasectl audit prune` removed
-- records after that id, the reader went on past them as if they had never
-- been there. leasestore_audit_pruned keeps, per namespace, the greatest id
-- a prune removed (the row of namespace '' the greatest of the whole
-- trail), so that a read whose cursor lies below it fails instead, naming
-- the prune (audit.ErrPruned). The read statements look it up by primary
-- key, through leasestore_audit_pruned_through, in their own snapshot.
--
-- A statement trigger keeps it, once per DELETE (a prune's batch), in the
-- batch's transaction, from the deleted rows (a transition table), so a
-- prune by a previous release (which serves this schema unchanged:
-- leasestore_compat stays as it is) keeps it too. Concurrent prunes wait
-- for each other on its rows, as they already do on leasestore_audit_prune.
-- Both functions are SECURITY DEFINER (search_path pinned to this schema):
-- an application role granted its tables before this version (GRANT ... ON
-- ALL TABLES IN SCHEMA covers only the tables that existed) reads and
-- prunes as before, without a grant on the new table.
-- Prunes made before this version left no mark. Down drops the table: a
-- reader behind an earlier prune goes on past it silently again.

-- +goose Up
CREATE TABLE leasestore_audit_pruned (
    namespace text   PRIMARY KEY,
    through   bigint NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_keep_pruned() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
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
CREATE FUNCTION leasestore_audit_pruned_through(p_namespace text) RETURNS bigint
STABLE LANGUAGE sql SECURITY DEFINER AS $$
    SELECT coalesce((SELECT through FROM leasestore_audit_pruned WHERE namespace = p_namespace), 0)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION leasestore_audit_keep_pruned() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION leasestore_audit_pruned_through(text) SET search_path = %I, pg_temp', current_schema());
END $$;
-- +goose StatementEnd

-- PostgreSQL lets PUBLIC execute a new function: no one but the owner may
-- attach the trigger function to a table of theirs (it runs as its owner,
-- and would raise the marks from the rows they delete). The read function
-- stays executable by every role that may read the trail.
REVOKE EXECUTE ON FUNCTION leasestore_audit_keep_pruned() FROM PUBLIC;

CREATE TRIGGER leasestore_audit_keep_pruned AFTER DELETE ON leasestore_audit
REFERENCING OLD TABLE AS leasestore_audit_gone
FOR EACH STATEMENT EXECUTE FUNCTION leasestore_audit_keep_pruned();

-- +goose Down
DROP TRIGGER leasestore_audit_keep_pruned ON leasestore_audit;
DROP FUNCTION leasestore_audit_pruned_through(text);
DROP FUNCTION leasestore_audit_keep_pruned();
DROP TABLE leasestore_audit_pruned;
