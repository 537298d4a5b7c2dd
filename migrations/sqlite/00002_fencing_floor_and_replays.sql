-- leasestore schema version 2 for SQLite.
--
-- Audit records keep the whole lease as the operation answered it, so that
-- a replay answers what the first request did: acquired_at and renewed_at
-- are new, and expires_at is now filled for release and revoke too (the
-- lease's expiry when it was given up). Records of version 1 have NULLs.
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

-- +goose Down
DROP TABLE leasestore_compat;
ALTER TABLE leasestore_audit DROP COLUMN renewed_at;
ALTER TABLE leasestore_audit DROP COLUMN acquired_at;
