package postgres_test

// The statements of leasestore's first release (schema version 1), verbatim,
// as a binary of that release still running during a rolling deploy sends
// them. compat_test.go runs them against a store migrated under it.
const (
	v1AcquireSQL = `
WITH fresh AS (
    SELECT nextval('leasestore_fencing_seq') AS token
    WHERE NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = $1 AND a.request_id = $5)
      AND NOT EXISTS (SELECT FROM leasestore_leases l WHERE l.namespace = $1 AND l.name = $2
                      AND (l.expires_at > coalesce($7::timestamptz, now()) OR l.version <> $8))
      AND pg_advisory_xact_lock(1818583411, hashtext($1 || '/' || $2)) IS NOT NULL
), after AS (
    INSERT INTO leasestore_leases AS l (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
    SELECT $1, $2, $3, fresh.token, coalesce($7::timestamptz, now()), coalesce($7::timestamptz, now()),
           coalesce($7::timestamptz, now()) + $4::interval, $8
    FROM fresh
    ON CONFLICT (namespace, name) DO UPDATE SET
        owner       = CASE WHEN l.expires_at <= excluded.acquired_at AND l.version = $8 THEN excluded.owner       ELSE l.owner       END,
        token       = CASE WHEN l.expires_at <= excluded.acquired_at AND l.version = $8 THEN excluded.token       ELSE l.token       END,
        acquired_at = CASE WHEN l.expires_at <= excluded.acquired_at AND l.version = $8 THEN excluded.acquired_at ELSE l.acquired_at END,
        renewed_at  = CASE WHEN l.expires_at <= excluded.acquired_at AND l.version = $8 THEN excluded.renewed_at  ELSE l.renewed_at  END,
        expires_at  = CASE WHEN l.expires_at <= excluded.acquired_at AND l.version = $8 THEN excluded.expires_at  ELSE l.expires_at  END
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at)
    SELECT pg_current_xact_id()::text::bigint, after.acquired_at, 'acquire', $1, $2, after.owner, after.token, $5, $3, '',
           'acquired', $9, $6, after.expires_at
    FROM after JOIN fresh ON after.token = fresh.token
)
SELECT coalesce($7::timestamptz, now()),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
       fresh.token,
       CASE WHEN after.token IS NULL THEN leasestore_outcome($1, $2, $5) END
FROM (SELECT) AS one
LEFT JOIN after ON true
LEFT JOIN fresh ON true`

	v1ReleaseSQL = `
WITH after AS (
    DELETE FROM leasestore_leases l
    WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3 AND l.token = $4
      AND l.expires_at > coalesce($7::timestamptz, now()) AND l.version = $8
      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = $1 AND a.request_id = $5)
      AND pg_advisory_xact_lock(1818583411, hashtext($1 || '/' || $2)) IS NOT NULL
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at)
    SELECT pg_current_xact_id()::text::bigint, coalesce($7::timestamptz, now()), 'release', $1, $2, after.owner,
           after.token, $5, $3, '', 'released', $9, $6, NULL
    FROM after
)
SELECT coalesce($7::timestamptz, now()),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
       NULL::bigint,
       CASE WHEN after.token IS NULL THEN leasestore_outcome($1, $2, $5) END
FROM (SELECT) AS one
LEFT JOIN after ON true`
)
