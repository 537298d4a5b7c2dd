-- leasestore schema version 2 for SQLite.
--
-- Audit records keep the whole lease as the operation answered it, so that
-- a replay answers what the first request did: acquired_at and renewed_at
-- are new, and expires_at is now filled for release and revoke too (the
-- lease's expiry when it was given up). Records of version 1 have NULLs.
--
-- Retention. Records leave only through `leasectl audit prune`, which opens
-- a window (a row of leasestore_audit_prune) in the transaction that
-- deletes, records the prune and closes the window; the trigger refuses any
-- other DELETE (and UPDATE, as before).
--
-- leasestore_compat tells a release that finds a schema newer than the one
-- it ships whether it can still serve it: a release whose newest migration
-- is at least oldest_serving_version can.

-- +goose Up
ALTER TABLE leasestore_audit ADD COLUMN acquired_at INTEGER;
ALTER TABLE leasestore_audit ADD COLUMN renewed_at INTEGER;

CREATE TABLE leasestore_compat (
    id                     INTEGER PRIMARY KEY CHECK (id = 1),
    oldest_serving_version INTEGER NOT NULL
) STRICT;
INSERT INTO leasestore_compat (id, oldest_serving_version) VALUES (1, 2);

CREATE TABLE leasestore_audit_prune (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    before INTEGER NOT NULL
) STRICT;

DROP TRIGGER leasestore_audit_no_delete;
-- +goose StatementBegin
CREATE TRIGGER leasestore_audit_no_delete BEFORE DELETE ON leasestore_audit
WHEN NOT coalesce(OLD.at < (SELECT before FROM leasestore_audit_prune WHERE id = 1), 0)
BEGIN
    SELECT RAISE(ABORT, 'leasestore_audit is append-only: DELETE refused (records leave only through `leasectl audit prune`)');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER leasestore_audit_no_delete;
-- +goose StatementBegin
CREATE TRIGGER leasestore_audit_no_delete BEFORE DELETE ON leasestore_audit
BEGIN
    SELECT RAISE(ABORT, 'leasestore_audit is append-only: DELETE refused');
END;
-- +goose StatementEnd
DROP TABLE leasestore_audit_prune;
DROP TABLE leasestore_compat;
ALTER TABLE leasestore_audit DROP COLUMN renewed_at;
ALTER TABLE leasestore_audit DROP COLUMN acquired_at;
