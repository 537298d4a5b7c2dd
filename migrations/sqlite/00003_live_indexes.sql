-- leasestore schema version 3 for SQLite.
--
-- Reads that do not scan the dead. Rows of expired leases stay in
-- leasestore_leases until the sweeper removes them (a grace after they
-- expired), so a namespace can hold many more expired rows than live ones.
-- The sweeper now first sets an expired row aside: swept_token takes the
-- row's token, and the live indexes hold only rows whose swept_token is not
-- their token. Lists of live leases read through them, so their cost
-- follows the live rows, not the expired ones. An acquire changes the row's
-- token, which puts it back in the live indexes.

-- +goose Up
ALTER TABLE leasestore_leases ADD COLUMN swept_token INTEGER;
CREATE INDEX leasestore_leases_live ON leasestore_leases (namespace, name)
    WHERE swept_token IS NOT token;
CREATE INDEX leasestore_leases_owner_live ON leasestore_leases (namespace, owner, name)
    WHERE swept_token IS NOT token;
DROP INDEX leasestore_leases_owner;

-- +goose Down
CREATE INDEX leasestore_leases_owner ON leasestore_leases (namespace, owner, name);
DROP INDEX leasestore_leases_owner_live;
DROP INDEX leasestore_leases_live;
ALTER TABLE leasestore_leases DROP COLUMN swept_token;
