-- leasestore schema version 4 for SQLite: lock-delays.
--
-- A lease may carry a lock-delay (microseconds): after it ends other than
-- by its holder's release, acquires of the key answer conflict until the
-- delay has passed. lock_delay counts only while delay_token equals the
-- row's token: an acquire of this release sets both, and one of the
-- previous release (which knows neither column) changes the token, so its
-- lease has no delay. Expiry keeps the row, so the delay after an expiry is
-- read from it. Revoke deletes the row, so a revoke of this release writes
-- the ended lease to leasestore_lock_delays, ended_at being the revoke's
-- time; acquires read it until ended_at + lock_delay, and the sweeper
-- removes it after. A release by the holder leaves nothing there. The
-- previous release serves this schema unchanged (leasestore_compat stays
-- as it is); it neither writes nor honours lock-delays.

-- +goose Up
ALTER TABLE leasestore_leases ADD COLUMN lock_delay INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leasestore_leases ADD COLUMN delay_token INTEGER;

CREATE TABLE leasestore_lock_delays (
    namespace   TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    ended_at    INTEGER NOT NULL,
    lock_delay  INTEGER NOT NULL CHECK (lock_delay > 0),
    PRIMARY KEY (namespace, name)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE leasestore_lock_delays;
ALTER TABLE leasestore_leases DROP COLUMN delay_token;
ALTER TABLE leasestore_leases DROP COLUMN lock_delay;
