-- leasestore schema version 2 for PostgreSQL.
--
-- Released and revoked leases leave their row behind as a tombstone:
-- ended_token takes the lease's token (the row is a tombstone while the two
-- are equal; an acquire changes token, also one of a release of schema
-- version 1 during a rolling deploy), ended_expiry the expiry it had (for
-- the answer and the audit record), and expires_at the time it ended, so
-- the row reads as expired to every release. The key's last token stays in
-- the table, and an acquire issues a greater one whatever the state of
-- leasestore_fencing_seq (a cache, a restore or a switchover that did not
-- carry it). No indexed column changes, so the update stays on its page
-- (HOT) where the page has room: fillfactor leaves some.

-- Audit records keep the whole lease as the operation answered it, so that
-- a replay answers what the first request did: acquired_at and renewed_at
-- are new, and expires_at is now filled for release and revoke too (the
-- lease's expiry when it was given up). Records of version 1 have NULLs.
--
-- Audit ids. A record's id is its writer's transaction id plus
-- leasestore_audit_era.id_offset (0 until a move to another cluster). A
-- follower reads only records below the oldest transaction still in
-- progress (pg_snapshot_xmin, plus the offset): every transaction below it
-- has ended, so no record below it can still appear, on a primary or a hot
-- standby. A cluster made by pg_restore or a logical-replication switchover
-- starts its transaction ids low: the first write that would get an id not
-- above every existing one fails with SQLSTATE LS001 instead, and the
-- backend (or `leasectl health`) calls leasestore_audit_new_era(), which
-- raises the offset so that new records sort after every earlier one.
--
-- Retention. Records leave only through `leasectl audit prune`, which opens
-- a window (a row of leasestore_audit_prune) in the transaction that
-- deletes, records the prune and closes the window; the trigger refuses any
-- other UPDATE, DELETE or TRUNCATE.
--
-- leasestore_compat tells a release that finds a schema newer than the one
-- it ships whether it can still serve it (rolling deploys migrate first):
-- a release whose newest migration is at least oldest_serving_version can.

-- +goose Up
-- Take both tables before changing either: statements lock them in
-- different orders, so waiting for one while holding the other could
-- deadlock with a statement of a running release. NOWAIT attempts take both
-- or neither; after a few seconds of a busy store, wait in line.
-- +goose StatementBegin
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        BEGIN
            LOCK TABLE leasestore_leases, leasestore_audit IN ACCESS EXCLUSIVE MODE NOWAIT;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.02 * random());
        END;
    END LOOP;
    LOCK TABLE leasestore_leases, leasestore_audit IN ACCESS EXCLUSIVE MODE;
END $$;
-- +goose StatementEnd

ALTER TABLE leasestore_leases ADD COLUMN ended_token bigint, ADD COLUMN ended_expiry timestamptz;
ALTER TABLE leasestore_leases SET (fillfactor = 80);

ALTER TABLE leasestore_audit
    ADD COLUMN acquired_at timestamptz,
    ADD COLUMN renewed_at  timestamptz;

CREATE TABLE leasestore_compat (
    id                     integer PRIMARY KEY CHECK (id = 1),
    oldest_serving_version bigint  NOT NULL
);
INSERT INTO leasestore_compat (id, oldest_serving_version) VALUES (1, 2);

CREATE TABLE leasestore_audit_era (
    id        integer PRIMARY KEY CHECK (id = 1),
    id_offset bigint  NOT NULL CHECK (id_offset >= 0)
);
INSERT INTO leasestore_audit_era (id, id_offset) VALUES (1, 0);

-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_went_back() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'leasestore_audit: a new record would sort before existing ones: the database was restored '
                    'or switched to another cluster; leasestore_audit_new_era() moves ids past them'
        USING ERRCODE = 'LS001';
END;
$$;
-- +goose StatementEnd

-- Raises the offset so that the next transaction id maps above every
-- existing record. SHARE ROW EXCLUSIVE waits for every writer in progress
-- and keeps new ones out until it commits, so no record is written with the
-- old offset afterwards. Returns the offset in effect.
-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_new_era() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    top  bigint;
    next bigint;
    cur  bigint;
BEGIN
    LOCK TABLE leasestore_audit IN SHARE ROW EXCLUSIVE MODE;
    SELECT id_offset INTO cur FROM leasestore_audit_era WHERE id = 1 FOR UPDATE;
    SELECT max(id) INTO top FROM leasestore_audit;
    next := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
    IF top IS NOT NULL AND next + cur <= top THEN
        cur := top - next + 1;
        UPDATE leasestore_audit_era SET id_offset = cur WHERE id = 1;
    END IF;
    RETURN cur;
END;
$$;
-- +goose StatementEnd

CREATE TABLE leasestore_audit_prune (
    id     integer     PRIMARY KEY CHECK (id = 1),
    before timestamptz NOT NULL
);

-- Time reads use a BRIN index: records are appended in time order, and a
-- BRIN index costs almost nothing to maintain.
DROP INDEX leasestore_audit_at;
CREATE INDEX leasestore_audit_at_brin ON leasestore_audit USING brin (at);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.at < (SELECT before FROM leasestore_audit_prune WHERE id = 1) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'leasestore_audit is append-only: % refused (records leave only through `leasectl audit prune`)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_outcome(p_namespace text, p_name text, p_request_id text) RETURNS json
STABLE LANGUAGE plpgsql AS $$
DECLARE
    r json;
BEGIN
    SELECT row_to_json(a) INTO r
    FROM (SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
                 params_hash, expires_at, acquired_at, renewed_at
          FROM leasestore_audit
          WHERE namespace = p_namespace AND request_id = p_request_id) AS a;
    IF r IS NOT NULL THEN
        RETURN json_build_object('prior', r);
    END IF;
    SELECT row_to_json(l) INTO r
    FROM (SELECT owner, token, acquired_at, renewed_at, expires_at, version, ended_token IS NOT DISTINCT FROM token AS ended
          FROM leasestore_leases
          WHERE namespace = p_namespace AND name = p_name) AS l;
    RETURN json_build_object('cur', r);
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- As in Up: take both tables before changing either: statements lock them in
-- different orders, so waiting for one while holding the other could
-- deadlock with a statement of a running release. NOWAIT attempts take both
-- or neither; after a few seconds of a busy store, wait in line.
-- +goose StatementBegin
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        BEGIN
            LOCK TABLE leasestore_leases, leasestore_audit IN ACCESS EXCLUSIVE MODE NOWAIT;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.02 * random());
        END;
    END LOOP;
    LOCK TABLE leasestore_leases, leasestore_audit IN ACCESS EXCLUSIVE MODE;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'leasestore_audit is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd
DROP INDEX leasestore_audit_at_brin;
CREATE INDEX leasestore_audit_at ON leasestore_audit (at, id);
DROP TABLE leasestore_audit_prune;
DROP FUNCTION leasestore_audit_new_era();
DROP FUNCTION leasestore_audit_went_back();
DROP TABLE leasestore_audit_era;
ALTER TABLE leasestore_leases RESET (fillfactor);
ALTER TABLE leasestore_leases DROP COLUMN ended_expiry, DROP COLUMN ended_token;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_outcome(p_namespace text, p_name text, p_request_id text) RETURNS json
STABLE LANGUAGE plpgsql AS $$
DECLARE
    r json;
BEGIN
    SELECT row_to_json(a) INTO r
    FROM (SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
                 params_hash, expires_at
          FROM leasestore_audit
          WHERE namespace = p_namespace AND request_id = p_request_id) AS a;
    IF r IS NOT NULL THEN
        RETURN json_build_object('prior', r);
    END IF;
    SELECT row_to_json(l) INTO r
    FROM (SELECT owner, token, acquired_at, renewed_at, expires_at, version
          FROM leasestore_leases
          WHERE namespace = p_namespace AND name = p_name) AS l;
    RETURN json_build_object('cur', r);
END;
$$;
-- +goose StatementEnd
DROP TABLE leasestore_compat;
ALTER TABLE leasestore_audit
    DROP COLUMN renewed_at,
    DROP COLUMN acquired_at;
