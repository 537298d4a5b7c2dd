-- leasestore schema version 6 for SQLite: nothing to change.
--
-- Version 6 indexes the tokens of PostgreSQL's leasestore_leases, whose
-- health check reads the greatest one. SQLite's fencing counter
-- (leasestore_fencing) is written in the transaction of every acquire, and
-- its triggers refuse to lower it; another handle on the file can still
-- lower it behind them (a trigger dropped and made again, or the sqlite3
-- shell's `.dbconfig enable_trigger off`), and the backend then moves it
-- back up at Open, New and Health, past the greatest token of the keys'
-- rows, the lock-delays and the newest audit records. Versions are the
-- same for every dialect, so this one records the version and changes
-- nothing.
--
-- Only comments changed since this file was first applied: goose records
-- a version and no checksum of its file, and never runs an applied one
-- again.

-- +goose Up

-- +goose Down
