-- leasestore schema version 2 for PostgreSQL.
--
-- Released and revoked leases leave their row behind as a tombstone (owner
-- '', the rest as it was), so that the key's last token stays in the table
-- and an acquire can issue a greater one whatever the state of
-- leasestore_fencing_seq (a cache, a restore or a switchover that did not
-- carry it). No DDL is needed for that; rows written by version 1 are valid.
-- A release of schema version 1 still running during a rolling deploy reads
-- a tombstone as a lease held by '' until its expiry: it answers conflict
-- where it could acquire, never the other way round.
--
-- Audit records keep the whole lease as the operation answered it, so that
-- a replay answers what the first request did: acquired_at and renewed_at
-- are new, and expires_at is now filled for release and revoke too (the
-- lease's expiry when it was given up). Records of version 1 have NULLs.
--
-- leasestore_compat tells a release that finds a schema newer than the one
-- it ships whether it can still serve it (rolling deploys migrate first):
-- a release whose newest migration is at least oldest_serving_version can.

-- +goose Up
ALTER TABLE leasestore_audit
    ADD COLUMN acquired_at timestamptz,
    ADD COLUMN renewed_at  timestamptz;

CREATE TABLE leasestore_compat (
    id                     integer PRIMARY KEY CHECK (id = 1),
    oldest_serving_version bigint  NOT NULL
);
INSERT INTO leasestore_compat (id, oldest_serving_version) VALUES (1, 2);

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
    FROM (SELECT owner, token, acquired_at, renewed_at, expires_at, version
          FROM leasestore_leases
          WHERE namespace = p_namespace AND name = p_name) AS l;
    RETURN json_build_object('cur', r);
END;
$$;
-- +goose StatementEnd

-- +goose Down
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
