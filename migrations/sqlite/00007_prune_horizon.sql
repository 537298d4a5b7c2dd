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
-- stays as it is) keeps it too, batch by batch. Prunes made before this
-- version left no mark. Down drops the table: a reader behind an earlier
-- prune goes on past it silently again.

-- +goose Up
CREATE TABLE leasestore_audit_pruned (
    namespace TEXT    PRIMARY KEY,
    through   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

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
