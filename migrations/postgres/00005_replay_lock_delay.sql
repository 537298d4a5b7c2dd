-- leasestore schema version 5 for PostgreSQL: replays keep the lock-delay.
--
-- A repeated renew, release or revoke answers the first outcome from its
-- audit record, which held no lock-delay, so a replay answered the lease
-- with none. lock_delay is the lease's lock-delay as the operation
-- answered it, NULL when it had none (and in every record written before
-- this version, or by a previous release: their replays answer none, as
-- before). leasestore_outcome also returns it (lock_delay_us) with the
-- prior record.
--
-- The previous releases serve this schema unchanged (leasestore_compat
-- stays as it is): their audit inserts name their columns, so they write
-- NULL, and they ignore the field of leasestore_outcome they do not know.
-- Down drops the column: replays of records written since answer no
-- lock-delay again. Adding a nullable column without a default changes
-- only the catalog; it takes the table's lock for a moment.

-- +goose Up
ALTER TABLE leasestore_audit ADD COLUMN lock_delay interval;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leasestore_outcome(p_namespace text, p_name text, p_request_id text) RETURNS json
STABLE LANGUAGE plpgsql AS $$
DECLARE
    r json;
BEGIN
    SELECT row_to_json(a) INTO r
    FROM (SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
                 params_hash, expires_at, acquired_at, renewed_at,
                 (extract(epoch FROM lock_delay) * 1000000)::bigint AS lock_delay_us
          FROM leasestore_audit
          WHERE namespace = p_namespace AND request_id = p_request_id) AS a;
    IF r IS NOT NULL THEN
        RETURN json_build_object('prior', r);
    END IF;
    SELECT row_to_json(l) INTO r
    FROM (SELECT owner, token, acquired_at, renewed_at, expires_at, version, ended_token IS NOT DISTINCT FROM token AS ended,
                 CASE WHEN abs(delay_token) = token THEN (extract(epoch FROM lock_delay) * 1000000)::bigint ELSE 0 END
                     AS lock_delay_us,
                 CASE WHEN (ended_token IS DISTINCT FROM token AND delay_token = token)
                           OR (ended_token = token AND delay_token = -token) THEN expires_at + lock_delay END
                     AS delay_ends
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
                 params_hash, expires_at, acquired_at, renewed_at
          FROM leasestore_audit
          WHERE namespace = p_namespace AND request_id = p_request_id) AS a;
    IF r IS NOT NULL THEN
        RETURN json_build_object('prior', r);
    END IF;
    SELECT row_to_json(l) INTO r
    FROM (SELECT owner, token, acquired_at, renewed_at, expires_at, version, ended_token IS NOT DISTINCT FROM token AS ended,
                 CASE WHEN abs(delay_token) = token THEN (extract(epoch FROM lock_delay) * 1000000)::bigint ELSE 0 END
                     AS lock_delay_us,
                 CASE WHEN (ended_token IS DISTINCT FROM token AND delay_token = token)
                           OR (ended_token = token AND delay_token = -token) THEN expires_at + lock_delay END
                     AS delay_ends
          FROM leasestore_leases
          WHERE namespace = p_namespace AND name = p_name) AS l;
    RETURN json_build_object('cur', r);
END;
$$;
-- +goose StatementEnd
ALTER TABLE leasestore_audit DROP COLUMN lock_delay;
