-- leasestore schema version 9 for SQLite: nothing to change.
--
-- Version 9 adds PostgreSQL's leasestore_outcome_fresh, which reads the
-- outcome of a change that met a later change of its key after its
-- statement's snapshot. SQLite writes inside its write lock, whose
-- transaction sees every change committed before it: no change can land
-- between what a write reads and what it changes. Versions are the same
-- for every dialect, so this one records the version and changes nothing.

-- +goose Up

-- +goose Down
