-- leasestore schema version 4 for PostgreSQL: lock-delays.
--
-- A lease may carry a lock-delay: after it ends other than by its holder's
-- release, acquires of the key answer conflict until the delay has passed.
-- lock_delay counts while delay_token equals the row's token (an expired
-- lease; acquires of this release set both, only when the delay is not
-- zero) or, after a revoke of this release, minus the token (the revoke's
-- tombstone, whose expires_at is the time it ended). A release leaves
-- delay_token alone, so its tombstone frees the key at once; an acquire of
-- the previous release, which knows neither column, changes the token, so
-- its lease has no delay. The previous release serves this schema
-- unchanged (leasestore_compat stays as it is): it neither writes nor
-- honours lock-delays, and its revokes leave none.
--
-- leasestore_outcome also reports the lease's lock-delay (lock_delay_us)
-- and when the delay that keeps the key ends (delay_ends, null when none
-- does), so that a refused acquire is classified by the row it met; a
-- release that decodes the JSON and does not know the fields ignores them.
--
-- Adding a column with a constant default changes only the catalog; it
-- takes the table's lock for a moment.

-- +goose Up
ALTER TABLE leasestore_leases ADD COLUMN lock_delay interval NOT NULL DEFAULT '0', ADD COLUMN delay_token bigint;
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

-- +goose Down
ALTER TABLE leasestore_leases DROP COLUMN delay_token, DROP COLUMN lock_delay;
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
