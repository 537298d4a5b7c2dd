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

-- Seeded from the prune records still in the trail (added after this
-- migration shipped: a store at version 7 or later never runs this Up
-- again, only a migrate down past 7 and up does, or a store first migrated
-- past 6 now). Without it, a down past 7 and up lost the mark, and a
-- follower behind a prune read on past the pruned records silently. Every
-- record a prune removed has an id below its prune record's (written by the
-- batch after its DELETE, a transaction id no earlier than the removed
-- records'), but ids here are transaction ids, with gaps, so the greatest
-- id removed cannot be read back: the mark becomes the last prune record's
-- id less one (of the prunes that removed any), at or above what the
-- trigger had kept, for the whole trail ('') and for every namespace that
-- still has a lease row or a record (which namespaces the removed records
-- were in is gone). A follower whose cursor lies between the two is refused
-- as behind a prune although it missed nothing, and starts again without
-- its cursor; none skips a record. A namespace with neither gets no row.
INSERT INTO leasestore_audit_pruned (namespace, through)
SELECT '', max(p.id) - 1 FROM leasestore_audit p
WHERE p.op = 'prune' AND p.status = 'pruned' AND p.reason NOT LIKE 'removed 0 records %'
HAVING count(*) > 0;

INSERT INTO leasestore_audit_pruned (namespace, through)
SELECT n.namespace, m.through
FROM (SELECT namespace FROM leasestore_leases UNION SELECT namespace FROM leasestore_audit WHERE namespace <> '') AS n,
     leasestore_audit_pruned AS m
WHERE m.namespace = '';

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
