-- leasestore schema version 5 for SQLite: replays keep the lock-delay.
--
-- A repeated renew, release or revoke answers the first outcome from its
-- audit record, which held no lock-delay, so a replay answered the lease
-- with none. lock_delay is the lease's lock-delay (microseconds) as the
-- operation answered it, NULL when it had none (and in every record
-- written before this version, or by a previous release: their replays
-- answer none, as before). The previous releases serve this schema
-- unchanged (leasestore_compat stays as it is): their audit inserts name
-- their columns, so they write NULL. Down drops the column: replays of
-- records written since answer no lock-delay again.

-- +goose Up
ALTER TABLE leasestore_audit ADD COLUMN lock_delay INTEGER CHECK (lock_delay > 0);

-- +goose Down
ALTER TABLE leasestore_audit DROP COLUMN lock_delay;
