-- leasestore schema version 7 for SQLite: where prunes left gaps.
--
-- A reader paging the trail by cursor (a follower above all) reads the
-- records after its cursor's id. When `leasectl audit prune` removed
-- records after that id, the reader went on past them as if they had never
-- been there. leasestore_audit_pruned keeps, per namespace, the greatest id
-- a prune removed (the row of namespace '' the greatest of the whole
-- trail), so that a read whose cursor lies below it fails instead, naming
-- the prune (audit.ErrPruned). A read costs one primary-key look-up more.
--
-- The trigger keeps it, in the transaction of each deletion, so a prune by
-- a previous release (which serves this schema unchanged: leasestore_compat
-- stays as it is) keeps it too, batch by batch. Down drops the table.
--
-- Up seeds the mark from the prune records still in the trail (added after
-- this migration shipped: a store at version 7 or later never runs this Up
-- again, only a migrate down past 7 and up does, or a store first migrated
-- past 6 now). Without it, a down past 7 and up lost the mark, and a
-- follower behind a prune read on past the pruned records silently. Every
-- record a prune removed has an id below its prune record's, and SQLite's
-- AUTOINCREMENT ids have no gaps but what deletions (prunes: the trail
-- refuses every other) left, so the whole trail's mark ('') is the
-- greatest id missing below the last prune record that removed any: what
-- the trigger had kept. Which namespace each removed record was in is not
-- in the trail any more: every namespace that still has a lease row or a
-- record gets the whole trail's mark, at or above its own (a follower of
-- it between the two is refused as behind a prune although it missed
-- nothing, and starts again without its cursor; none skips a record). A
-- namespace with neither gets no row, as before.

-- +goose Up
CREATE TABLE leasestore_audit_pruned (
    namespace TEXT    PRIMARY KEY,
    through   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO leasestore_audit_pruned (namespace, through)
SELECT '', gap.through FROM (
    SELECT max(a.id - 1) AS through FROM leasestore_audit a
    WHERE a.id > 1
      AND a.id <= (SELECT max(p.id) FROM leasestore_audit p
                   WHERE p.op = 'prune' AND p.status = 'pruned' AND p.reason NOT LIKE 'removed 0 records %')
      AND NOT EXISTS (SELECT 1 FROM leasestore_audit b WHERE b.id = a.id - 1)
) AS gap
WHERE gap.through IS NOT NULL;

INSERT INTO leasestore_audit_pruned (namespace, through)
SELECT n.namespace, m.through
FROM (SELECT namespace FROM leasestore_leases UNION SELECT namespace FROM leasestore_audit WHERE namespace <> '') AS n,
     leasestore_audit_pruned AS m
WHERE m.namespace = '';

-- +goose StatementBegin
CREATE TRIGGER leasestore_audit_pruned_through AFTER DELETE ON leasestore_audit
BEGIN
    INSERT INTO leasestore_audit_pruned (namespace, through) VALUES (OLD.namespace, OLD.id)
    ON CONFLICT (namespace) DO UPDATE SET through = max(through, excluded.through);
    INSERT INTO leasestore_audit_pruned (namespace, through) VALUES ('', OLD.id)
    ON CONFLICT (namespace) DO UPDATE SET through = max(through, excluded.through);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER leasestore_audit_pruned_through;
DROP TABLE leasestore_audit_pruned;
