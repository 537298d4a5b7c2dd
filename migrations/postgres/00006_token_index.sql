-- leasestore schema version 6 for PostgreSQL: the greatest token without a
-- full scan.
--
-- Health (and Open, every readiness probe of a served store) compares
-- leasestore_fencing_seq with the greatest token in leasestore_leases, to
-- repair a sequence that a logical-replication switchover or a restore
-- left behind; the sweeper keeps the row that holds that token, and
-- `leasectl fencing raise` starts from it. Without an index each of them
-- read the whole table: about 0.3 s at 2 million rows on the project's
-- machine; at that rate (not measured) about 1.5 s at ten million, longer
-- than the 1 s a readiness probe waits by default.
-- This index answers max(token) from its last page. An acquire writes one
-- entry more, always the greatest, at the index's right edge; renew,
-- release and the sweeper's setting aside do not change the token, so
-- their updates stay on their page (HOT) as before.
--
-- Built CONCURRENTLY (outside a transaction), so writers go on while it is
-- built. A build that was cut short leaves an invalid index, which the
-- next `leasectl migrate up` drops and builds again. The previous releases
-- serve this schema unchanged (leasestore_compat stays as it is).

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS leasestore_leases_token;
CREATE INDEX CONCURRENTLY leasestore_leases_token ON leasestore_leases (token);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS leasestore_leases_token;
