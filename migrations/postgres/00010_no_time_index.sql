-- leasestore schema version 10 for PostgreSQL: nothing to change.
--
-- Version 10 drops SQLite's time index on the audit trail, a B-tree that
-- no statement read and that every write paid a page for. PostgreSQL's
-- (leasestore_audit_at_brin, migration 2) is a BRIN index, whose upkeep
-- did not show in the writes' rate (pgbench on the backend's statements,
-- with and without it, interleaved: within a percent at 1 and 8 clients),
-- and which a prune's plan may use to find the records before its cut-off.
-- Versions are the same for every dialect, so this one records the version
-- and changes nothing.

-- +goose Up

-- +goose Down
