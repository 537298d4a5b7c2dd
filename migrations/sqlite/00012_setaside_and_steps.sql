-- leasestore schema version 12 for SQLite: an index of the set-aside
-- leases, and the steps back of the trail's times.
--
-- The sweeper sets aside a row its clock finds expired (swept_token =
-- token, migration 3), out of the live indexes that list reads. The
-- sweeper of a process whose clock runs ahead of another's sets aside
-- rows that are still live to the other, whose get and acquire see them
-- but whose list left them out until their holders renewed.
-- leasestore_leases_set_aside holds only the set-aside rows, by namespace
-- and expiry: list reads, beside the live index, the set-aside rows that
-- its clock finds live, a range at the end of this index (the rows that
-- expire after its now), so its cost still follows the live rows. No
-- write but the sweeper's setting aside, an acquire of a set-aside key
-- and the renew that puts a set-aside row back touches it: the row of a
-- live lease is not in it, so acquire, renew and release write no page of
-- it.
--
-- A read of the records since T starts after an id found by a binary
-- search over ids, which assumed that ids follow times (within
-- sinceSlack). A clock that steps back (an NTP step, a VM restored on
-- another host, processes on one file whose clocks disagree) writes newer
-- records before older ones, and the read left out records at or after T
-- written before the step. leasestore_audit_steps keeps, for each record
-- whose time is before its predecessor's, its id and top, the greatest
-- time of the records before it; the trigger leasestore_audit_step writes
-- it, in the insert's transaction, reading the previous record and the
-- previous step (no page is written but when the clock went back). Between
-- two steps times do not decrease, so the greatest time of the records up
-- to an id is that record's time or the top of the last step at or before
-- it, whichever is greater: it grows with ids, and the binary search runs
-- over it, which misses no record whatever the clock did. The steps of the
-- trail already written are read from it once, here. A prune leaves the
-- steps of the records it removed: their tops only make a read start
-- earlier. The previous release serves this schema unchanged
-- (leasestore_compat stays as it is): its writes fire the trigger as this
-- release's do. Down drops the three.

-- +goose Up
CREATE INDEX leasestore_leases_set_aside ON leasestore_leases (namespace, expires_at)
    WHERE swept_token IS token;

CREATE TABLE leasestore_audit_steps (
    id  INTEGER PRIMARY KEY,
    top INTEGER NOT NULL
) STRICT;

INSERT INTO leasestore_audit_steps (id, top)
SELECT id, top FROM (
    SELECT id, at, lag(at) OVER (ORDER BY id) AS prev,
           max(at) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS top
    FROM leasestore_audit)
WHERE at < prev;

-- +goose StatementBegin
CREATE TRIGGER leasestore_audit_step AFTER INSERT ON leasestore_audit
WHEN NEW.at < (SELECT p.at FROM leasestore_audit p WHERE p.id < NEW.id ORDER BY p.id DESC LIMIT 1)
BEGIN
    INSERT INTO leasestore_audit_steps (id, top)
    SELECT NEW.id, max(p.at, coalesce((SELECT s.top FROM leasestore_audit_steps s WHERE s.id < NEW.id ORDER BY s.id DESC LIMIT 1), p.at))
    FROM (SELECT p.at FROM leasestore_audit p WHERE p.id < NEW.id ORDER BY p.id DESC LIMIT 1) AS p;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER leasestore_audit_step;
DROP TABLE leasestore_audit_steps;
DROP INDEX leasestore_leases_set_aside;
