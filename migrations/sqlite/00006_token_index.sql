-- leasestore schema version 6 for SQLite: nothing to change.
--
-- Version 6 indexes the tokens of PostgreSQL's leasestore_leases, whose
-- health check reads the greatest one. SQLite's health check does not: its
-- fencing counter (leasestore_fencing) is written in the transaction of
-- every acquire and cannot fall behind. Versions are the same for every
-- dialect, so this one records the version and changes nothing.

-- +goose Up

-- +goose Down
