-- leasestore schema version 12 for PostgreSQL: a BRIN index on the trail's
-- ids, beside the one on its times.
--
-- A read of the records since T starts after an id found by a binary
-- search over ids (sinceStartSQL), which assumed that a record's time
-- lags its place in the trail by at most a statement's run time. The
-- server's clock may step back (an NTP step, a VM restored on another
-- host), and then records with smaller ids are newer than records with
-- greater ones: the read left out records at or after T written before
-- the step. The read now also asks whether any record at or before the
-- id the search found is at or after T, and starts before the first such
-- one, so that it misses none whatever the clock did. The two BRIN
-- indexes answer that together (a BitmapAnd): in the ordinary trail only
-- the block range where the search landed holds both ids at or below the
-- found one and times at or after T, so the check reads that range, not
-- the records since T (which the time index alone would read). A BRIN
-- index's upkeep is a summary per 128 pages, widened in place by a write
-- to a summarized range: it did not measurably change the writes' time or
-- the server's CPU (BenchmarkWritePath, interleaved with schema 11), and
-- adds a little WAL (the figures are in the commit that added it).
-- Pages past the last summarized range match every BRIN scan, so both
-- indexes summarize a range as soon as the next one starts
-- (autosummarize: a work item for autovacuum, not for the writer);
-- otherwise the check would read every record written since the trail
-- was last vacuumed.
--
-- Built CONCURRENTLY (outside a transaction), so writers go on while it
-- is built. A build that was cut short leaves an invalid index, which the
-- next `leasectl migrate up` drops and builds again. The previous
-- releases serve this schema unchanged (leasestore_compat stays as it
-- is): none of their statements names the index.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS leasestore_audit_id_brin;
CREATE INDEX CONCURRENTLY leasestore_audit_id_brin ON leasestore_audit USING brin (id) WITH (autosummarize = on);
ALTER INDEX leasestore_audit_at_brin SET (autosummarize = on);

-- +goose Down
ALTER INDEX leasestore_audit_at_brin RESET (autosummarize);
DROP INDEX CONCURRENTLY IF EXISTS leasestore_audit_id_brin;
