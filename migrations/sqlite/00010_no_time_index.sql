-- leasestore schema version 10 for SQLite: the trail's time index goes.
--
-- leasestore_audit_at (at, id) took an entry from every audit record, one
-- page of the nine or so each write commits, and served no statement:
-- reads walk the trail by id (the primary key, or the key index for one
-- key's records) from a cursor or, by time, from where the records of that
-- time begin (a binary search over ids, as on PostgreSQL), and a prune
-- walks it from its oldest record in id order, stopping after its batch.
-- SQLite's planner chose neither it nor a sort for any of them (EXPLAIN
-- QUERY PLAN on schema 9). Without it a write commits one page fewer
-- (BenchmarkWALFrames). The previous release serves this schema unchanged
-- (leasestore_compat stays as it is): none of its statements names the
-- index. Down builds it again, reading the whole trail.

-- +goose Up
DROP INDEX leasestore_audit_at;

-- +goose Down
CREATE INDEX leasestore_audit_at ON leasestore_audit (at, id);
