-- leasestore schema version 3 for PostgreSQL.
--
-- Reads that do not scan the dead. Rows of expired, released and revoked
-- leases stay in leasestore_leases until the sweeper removes them (a grace
-- after they ended), so a namespace can hold many more ended rows than live
-- ones. The sweeper now first sets an ended row aside: swept_token takes the
-- row's token. The live indexes order rows by whether swept_token differs
-- from their token before the name, so a list of live leases reads a range
-- that holds no set-aside row: its cost follows the live rows, not the
-- ended ones. (Expression indexes rather than partial ones: ANALYZE keeps
-- statistics of an index expression, so the planner knows how few rows are
-- live; it has none for a partial index's predicate.) An acquire changes
-- the row's token, which moves the row back to the live range without
-- touching swept_token (also an acquire of a release that does not know
-- the column). A renew clears swept_token: one that judged the lease live
-- before it waited on the key's lock can land after the sweeper set the
-- row aside (a release of schema 2 does not clear it, and such a lease is
-- missing from lists until a renew of this release); clearing a NULL, and
-- release, change nothing the live indexes read, so those updates can stay
-- on the page (HOT). The planner learns that
-- rows were set aside when the table is next analyzed (autovacuum does it
-- after a tenth of the rows changed).
--
-- The owner index gives way to the live one, which serves lists by owner
-- with or without expired leases. Building the two indexes holds the
-- leases table for a time that grows with its rows (seconds for
-- millions); run it when a pause of writes is acceptable.

-- +goose Up
-- The strongest lock first (ALTER TABLE takes the table whole), so that no
-- lock is upgraded while writers wait.
ALTER TABLE leasestore_leases ADD COLUMN swept_token bigint;
CREATE INDEX leasestore_leases_live ON leasestore_leases
    (namespace, (swept_token IS DISTINCT FROM token), name);
CREATE INDEX leasestore_leases_owner_live ON leasestore_leases
    (owner, namespace, (swept_token IS DISTINCT FROM token), name);
DROP INDEX leasestore_leases_owner;

-- +goose Down
-- The strongest lock first (DROP INDEX takes the table whole): taking a
-- weaker one (CREATE INDEX) and upgrading later could deadlock with a
-- running release's writers.
DROP INDEX leasestore_leases_owner_live;
DROP INDEX leasestore_leases_live;
ALTER TABLE leasestore_leases DROP COLUMN swept_token;
CREATE INDEX leasestore_leases_owner ON leasestore_leases (owner, namespace, name);
