-- leasestore schema version 11 for SQLite: nothing to change.
--
-- Version 11 counts, on PostgreSQL, the prune batches that removed each
-- namespace's records, so that a follower that started after a prune, its
-- first cursor at the horizon below the ids the prune removed (a
-- transaction older than them still open), is not refused as behind it.
-- SQLite has no horizon: its one writer commits in id order, and a
-- follower's first cursor lies past every record its read passed over,
-- the prune's own record (written with the last batch, after every id it
-- removed) included, so it is never below what a prune removed before it.
-- Versions are the same for every dialect, so this one records the
-- version and changes nothing.

-- +goose Up

-- +goose Down
