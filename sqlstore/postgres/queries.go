package postgres

// Every statement the backend sends lives in this file.
//
// Each lease operation is exactly one statement, so one round trip. The
// state-changing statements share a shape:
//
//	after  the conditional change. Its WHERE also holds the idempotency
//	       look-up (no audit row has this (namespace, request id)) and takes
//	       a transaction-scoped advisory lock on the key (see below). It
//	       locks the row and re-checks its condition on the newest committed
//	       version (READ COMMITTED); RETURNING gives the row as changed.
//	rec    the audit row, inserted only from the change's RETURNING, so it
//	       exists exactly when the change happened
//
// (acquire puts the look-up and the lock in the condition of its fresh CTE,
// which draws the token, and its change is an INSERT ... ON CONFLICT), and
// the final SELECT returns one row: the time, the row as changed (for
// acquire: or as locked by ON CONFLICT), the token acquire drew, and, only
// when no row came back, leasestore_outcome (see the migration): as JSON,
// the earlier audit row of the request id (prior) if there is one, else the
// key's row as the statement's snapshot sees it (cur). Those reads sit in a
// function called from a CASE, not in the plan, so a change that takes
// effect neither runs nor initializes them (executor start-up is a large
// share of such a short statement's cost). The classification happens in Go
// with the protocol's Check functions.
//
// Time is coalesce($now, now()): the injected test clock, or the server's
// clock at the start of the statement's transaction (the statement is its
// own transaction).
//
// Snapshots and races. Every part of the statement sees one snapshot, taken
// when the statement starts; a plain read (the look-up, prior, cur) does not
// see what commits afterwards, while UPDATE, DELETE and INSERT ... ON
// CONFLICT lock the row they change and re-check their WHERE on its newest
// version. When the two disagree (the snapshot allowed the change but the
// re-check refused it, because another transaction changed the row after
// our snapshot was taken) the statement changed nothing and the backend runs
// it once more with a fresh snapshot; see Backend.change. A concurrent
// request with the same request id makes the audit insert fail on
// leasestore_audit_request (the second writer waits for the first and then
// violates the unique constraint); the statement is rolled back and re-run,
// and its fresh snapshot finds the first writer's audit row: a replay.
//
// Audit ids and the key lock. An audit row's id is its writer's transaction
// id (see the migration), which lets readers hold back records that may
// still gain a predecessor (readAuditSQL). For the trail of one key to read
// in the order the changes happened, a later change of a key must get a
// greater transaction id. PostgreSQL assigns the id at a transaction's
// first write, and an UPDATE or DELETE takes it before it waits for a row
// lock, so two writers queued on one row could commit in the opposite order
// of their ids. The advisory lock prevents that: every change takes a lock
// on its key (class 1818583411, "leas"; the key's hash) before it writes
// anything, and keeps it until it commits, so writers of one key get their
// transaction ids, and commit, one after the other. The lock is a condition
// of the change's scan, so it is taken before the row is written; acquire
// takes it in the condition that draws its token. Hash collisions only make
// two keys wait for each other.
//
// Parameters shared by the state-changing statements: $lv is
// protocol.LeaseFormatVersion (rows of another version are never changed, and
// are returned so that the backend refuses them) and $rv is
// audit.RecordFormatVersion.

// outcomeColumns is the select list every state-changing statement ends
// with; Backend.runChange reads it.
//
//	now
//	owner, token, acquired_at, renewed_at, expires_at, version: the row as
//	       changed (for acquire: or as locked by ON CONFLICT); NULLs if none
//	fresh: the token drawn for this acquire (NULL for other operations)
//	outcome: leasestore_outcome's JSON when no row came back, else NULL

// acquireSQL: $1 namespace, $2 name, $3 owner, $4 ttl (interval),
// $5 request id, $6 params hash, $7 now (NULL: the server's), $8 $lv, $9 $rv.
//
// prev is the key's row in the statement's snapshot: a live lease, an
// expired one, or a tombstone (empty owner) left by a release or revoke. The
// token is drawn in the fresh CTE only when the snapshot says the key is
// free and the request id is new; a conflict that the snapshot already shows
// costs no token and takes no lock. The token is the greater of the
// sequence's next value and prev's token plus one: tokens of a key increase
// whatever the sequence's state (a cache, a restore or a switchover that did
// not carry it). When a concurrent acquire took the key after our snapshot,
// our INSERT meets its row: ON CONFLICT waits for it, locks it and evaluates
// the CASEs against its newest version. The DO UPDATE has no WHERE on
// purpose: a failing WHERE would return no row, and the statement could not
// tell whom it lost to; instead the CASEs keep every column unless the row
// is free and its token below ours (a no-op update, paid only in a race),
// and RETURNING yields the row as it is. The acquire took effect exactly
// when the row returned carries the drawn token; a drawn token left unused
// is a gap, which is harmless as tokens need only increase.
const acquireSQL = `
WITH prev AS (
    SELECT l.owner, l.token, l.expires_at, l.version
    FROM leasestore_leases l WHERE l.namespace = $1 AND l.name = $2
), fresh AS (
    SELECT greatest(nextval('leasestore_fencing_seq'), coalesce((SELECT prev.token FROM prev), 0) + 1) AS token
    WHERE NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = $1 AND a.request_id = $5)
      AND NOT EXISTS (SELECT FROM prev
                      WHERE (prev.owner <> '' AND prev.expires_at > coalesce($7::timestamptz, now())) OR prev.version <> $8)
      AND pg_advisory_xact_lock(1818583411, hashtext($1 || '/' || $2)) IS NOT NULL
), after AS (
    INSERT INTO leasestore_leases AS l (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
    SELECT $1, $2, $3, fresh.token, coalesce($7::timestamptz, now()), coalesce($7::timestamptz, now()),
           coalesce($7::timestamptz, now()) + $4::interval, $8
    FROM fresh
    ON CONFLICT (namespace, name) DO UPDATE SET
        owner       = CASE WHEN (l.owner = '' OR l.expires_at <= excluded.acquired_at) AND l.version = $8 AND l.token < excluded.token THEN excluded.owner       ELSE l.owner       END,
        token       = CASE WHEN (l.owner = '' OR l.expires_at <= excluded.acquired_at) AND l.version = $8 AND l.token < excluded.token THEN excluded.token       ELSE l.token       END,
        acquired_at = CASE WHEN (l.owner = '' OR l.expires_at <= excluded.acquired_at) AND l.version = $8 AND l.token < excluded.token THEN excluded.acquired_at ELSE l.acquired_at END,
        renewed_at  = CASE WHEN (l.owner = '' OR l.expires_at <= excluded.acquired_at) AND l.version = $8 AND l.token < excluded.token THEN excluded.renewed_at  ELSE l.renewed_at  END,
        expires_at  = CASE WHEN (l.owner = '' OR l.expires_at <= excluded.acquired_at) AND l.version = $8 AND l.token < excluded.token THEN excluded.expires_at  ELSE l.expires_at  END
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at, acquired_at, renewed_at)
    SELECT pg_current_xact_id()::text::bigint, after.acquired_at, 'acquire', $1, $2, after.owner, after.token, $5, $3, '',
           'acquired', $9, $6, after.expires_at, after.acquired_at, after.renewed_at
    FROM after JOIN fresh ON after.token = fresh.token
)
SELECT coalesce($7::timestamptz, now()),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
       fresh.token,
       CASE WHEN after.token IS NULL THEN leasestore_outcome($1, $2, $5) END
FROM (SELECT) AS one
LEFT JOIN after ON true
LEFT JOIN fresh ON true`

// renewSQL: $1 namespace, $2 name, $3 owner, $4 token, $5 ttl (interval),
// $6 request id, $7 params hash, $8 now, $9 $lv, $10 $rv. A tombstone's
// owner is empty, which no request's is.
const renewSQL = `
WITH after AS (
    UPDATE leasestore_leases l
    SET renewed_at = coalesce($8::timestamptz, now()), expires_at = coalesce($8::timestamptz, now()) + $5::interval
    WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3 AND l.token = $4
      AND l.expires_at > coalesce($8::timestamptz, now()) AND l.version = $9
      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = $1 AND a.request_id = $6)
      AND pg_advisory_xact_lock(1818583411, hashtext($1 || '/' || $2)) IS NOT NULL
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at, acquired_at, renewed_at)
    SELECT pg_current_xact_id()::text::bigint, after.renewed_at, 'renew', $1, $2, after.owner, after.token, $6, $3, '',
           'renewed', $10, $7, after.expires_at, after.acquired_at, after.renewed_at
    FROM after
)
SELECT coalesce($8::timestamptz, now()),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
       NULL::bigint,
       CASE WHEN after.token IS NULL THEN leasestore_outcome($1, $2, $6) END
FROM (SELECT) AS one
LEFT JOIN after ON true`

// releaseSQL: $1 namespace, $2 name, $3 owner, $4 token, $5 request id,
// $6 params hash, $7 now, $8 $lv, $9 $rv. The row stays as a tombstone
// (see acquireSQL): its owner is emptied and the rest is kept, so RETURNING
// gives the lease as released.
const releaseSQL = `
WITH after AS (
    UPDATE leasestore_leases l SET owner = ''
    WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3 AND l.token = $4
      AND l.expires_at > coalesce($7::timestamptz, now()) AND l.version = $8
      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = $1 AND a.request_id = $5)
      AND pg_advisory_xact_lock(1818583411, hashtext($1 || '/' || $2)) IS NOT NULL
    RETURNING $3::text AS owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at, acquired_at, renewed_at)
    SELECT pg_current_xact_id()::text::bigint, coalesce($7::timestamptz, now()), 'release', $1, $2, after.owner,
           after.token, $5, $3, '', 'released', $9, $6, after.expires_at, after.acquired_at, after.renewed_at
    FROM after
)
SELECT coalesce($7::timestamptz, now()),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
       NULL::bigint,
       CASE WHEN after.token IS NULL THEN leasestore_outcome($1, $2, $5) END
FROM (SELECT) AS one
LEFT JOIN after ON true`

// revokeSQL: $1 namespace, $2 name, $3 actor, $4 reason, $5 token (0: any),
// $6 request id, $7 params hash, $8 now, $9 $lv, $10 $rv. Like release, it
// leaves a tombstone. The audit row's owner is the revoked lease's owner,
// read from the snapshot (prev): the UPDATE re-checks on the newest version
// that the token is still prev's, and a token has one owner for life.
const revokeSQL = `
WITH prev AS (
    SELECT l.owner, l.token FROM leasestore_leases l
    WHERE l.namespace = $1 AND l.name = $2 AND l.owner <> ''
), after AS (
    UPDATE leasestore_leases l SET owner = ''
    FROM prev
    WHERE l.namespace = $1 AND l.name = $2 AND l.token = prev.token AND l.owner <> ''
      AND ($5::bigint = 0 OR l.token = $5)
      AND l.expires_at > coalesce($8::timestamptz, now()) AND l.version = $9
      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = $1 AND a.request_id = $6)
      AND pg_advisory_xact_lock(1818583411, hashtext($1 || '/' || $2)) IS NOT NULL
    RETURNING prev.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at, acquired_at, renewed_at)
    SELECT pg_current_xact_id()::text::bigint, coalesce($8::timestamptz, now()), 'revoke', $1, $2, after.owner,
           after.token, $6, $3, $4, 'revoked', $10, $7, after.expires_at, after.acquired_at, after.renewed_at
    FROM after
)
SELECT coalesce($8::timestamptz, now()),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
       NULL::bigint,
       CASE WHEN after.token IS NULL THEN leasestore_outcome($1, $2, $6) END
FROM (SELECT) AS one
LEFT JOIN after ON true`

// getSQL: $1 namespace, $2 name, $3 now. Always one row: the clock and the
// key's lease (NULLs when there is none or only a tombstone). Expiry is
// judged in Go.
const getSQL = `
SELECT clock.now, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
FROM (SELECT coalesce($3::timestamptz, now()) AS now) AS clock
LEFT JOIN leasestore_leases l ON l.namespace = $1 AND l.name = $2 AND l.owner <> ''`

// listSQL: $1 namespace, $2 prefix ("" for none), $3 the name to resume
// after ("" for the first page; names are never empty), $4 include expired,
// $5 now, $6 limit+1. The "C" collation of name makes the order bytewise and
// lets the primary key serve both the prefix range (name >= prefix) and the
// keyset condition.
const listSQL = `
SELECT l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
FROM leasestore_leases l
WHERE l.namespace = $1
  AND l.name >= $2 AND starts_with(l.name, $2)
  AND l.name > $3 AND l.owner <> ''
  AND ($4::boolean OR l.expires_at > coalesce($5::timestamptz, now()))
ORDER BY l.name
LIMIT $6`

// listOwnerSQL is listSQL for one owner, $7, through the owner index.
const listOwnerSQL = `
SELECT l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version
FROM leasestore_leases l
WHERE l.owner = $7 AND l.namespace = $1
  AND l.name >= $2 AND starts_with(l.name, $2)
  AND l.name > $3
  AND ($4::boolean OR l.expires_at > coalesce($5::timestamptz, now()))
ORDER BY l.name
LIMIT $6`

// readAuditSQL: $1 the id to resume after (0 for the start), $2 namespace
// ("" for all), $3 since (NULL for all), $4 limit+1, $5 follow (hold back,
// see below). readAuditKeySQL is the same for one key, $6 the name, through
// the key index.
//
// A record's id is its writer's transaction id, and transactions commit in
// any order, so a record may become visible before one with a smaller id.
// A plain read returns what its snapshot sees, so a caller reads its own
// writes. A follower's read ($5 true, audit.Query.Follow) returns only
// records below a horizon: the smallest
// transaction id, among those in progress when its snapshot was taken, that
// may still add a record. Those are the transactions that now hold the
// write lock on leasestore_audit (every writer takes it when its statement
// starts, before it has a transaction id, and keeps it until it commits),
// and, conservatively, those that committed since the snapshot was taken
// (their records, if any, are not in it). Transactions that merely run
// elsewhere in the cluster do not hold records back. So a follower that
// resumes after the last id it saw never skips a record: anything below the
// horizon that is not in this page's snapshot was rolled back.
//
// pg_locks reports 32-bit transaction ids; the snapshot's are 64-bit, and
// their low 32 bits match.
const readAuditSQL = `
WITH snap AS (
    SELECT pg_current_snapshot() AS s
), writers AS (
    SELECT t.transactionid::text::bigint AS xid32
    FROM pg_locks r
    JOIN pg_locks t ON t.virtualtransaction = r.virtualtransaction AND t.locktype = 'transactionid'
    WHERE r.locktype = 'relation' AND r.mode = 'RowExclusiveLock' AND r.granted
      AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND r.relation = 'leasestore_audit'::regclass
), horizon AS (
    SELECT coalesce(
               (SELECT min(x::text::bigint)
                FROM pg_snapshot_xip(snap.s) AS x
                WHERE pg_xact_status(x) = 'committed'
                   OR x::text::bigint % 4294967296 IN (SELECT xid32 FROM writers)),
               pg_snapshot_xmax(snap.s)::text::bigint) AS id
    FROM snap
)
SELECT a.id, a.at, a.op, a.namespace, a.name, a.owner, a.token, a.request_id, a.actor, a.reason,
       a.status, a.version, a.expires_at
FROM leasestore_audit a
WHERE a.id > $1
  AND (NOT $5::boolean OR a.id < (SELECT id FROM horizon))
  AND ($2::text = '' OR a.namespace = $2)
  AND ($3::timestamptz IS NULL OR a.at >= $3)
ORDER BY a.id
LIMIT $4`

const readAuditKeySQL = `
WITH snap AS (
    SELECT pg_current_snapshot() AS s
), writers AS (
    SELECT t.transactionid::text::bigint AS xid32
    FROM pg_locks r
    JOIN pg_locks t ON t.virtualtransaction = r.virtualtransaction AND t.locktype = 'transactionid'
    WHERE r.locktype = 'relation' AND r.mode = 'RowExclusiveLock' AND r.granted
      AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND r.relation = 'leasestore_audit'::regclass
), horizon AS (
    SELECT coalesce(
               (SELECT min(x::text::bigint)
                FROM pg_snapshot_xip(snap.s) AS x
                WHERE pg_xact_status(x) = 'committed'
                   OR x::text::bigint % 4294967296 IN (SELECT xid32 FROM writers)),
               pg_snapshot_xmax(snap.s)::text::bigint) AS id
    FROM snap
)
SELECT a.id, a.at, a.op, a.namespace, a.name, a.owner, a.token, a.request_id, a.actor, a.reason,
       a.status, a.version, a.expires_at
FROM leasestore_audit a
WHERE a.name = $6 AND a.namespace = $2
  AND a.id > $1
  AND (NOT $5::boolean OR a.id < (SELECT id FROM horizon))
  AND ($3::timestamptz IS NULL OR a.at >= $3)
ORDER BY a.id
LIMIT $4`

// schemaSQL reads the connection's current schema and whether goose's
// version table exists in it (the same test goose makes).
const schemaSQL = `
SELECT current_schema(),
       EXISTS (SELECT FROM pg_catalog.pg_tables
               WHERE schemaname = current_schema() AND tablename = 'leasestore_goose_db_version')`

// schemaVersionSQL reads the applied migration version: goose deletes a
// version's row when it rolls it back, so the maximum is the current one.
const schemaVersionSQL = `SELECT coalesce(max(version_id), 0) FROM leasestore_goose_db_version`

// schemaCompatSQL reads the oldest release schema version that can serve
// this (newer) schema; see migrations/postgres/00002.
const schemaCompatSQL = `SELECT oldest_serving_version FROM leasestore_compat WHERE id = 1`

// pinSettingsSQL runs on every connection of a pool that Open makes: a
// crash must not lose a committed acquire (its token could be issued
// again), so synchronous_commit is raised to on unless it is already
// stronger (remote_write, remote_apply). Open also pins
// default_transaction_isolation to read committed as a startup parameter:
// the statements re-check their conditions on the newest row version, as
// read committed does, instead of failing to serialize.
const pinSettingsSQL = `
SELECT set_config('synchronous_commit', 'on', false)
WHERE current_setting('synchronous_commit') IN ('off', 'local')`

// settingsSQL reads what checkSettings judges: synchronous_commit, the
// fencing sequence's cache, and whether the sequence is behind the newest
// audit record's token (a cheap sign that it lost its state).
const settingsSQL = `
SELECT current_setting('synchronous_commit'),
       (SELECT seqcache FROM pg_catalog.pg_sequence WHERE seqrelid = 'leasestore_fencing_seq'::regclass),
       coalesce((SELECT a.token FROM leasestore_audit a ORDER BY a.id DESC LIMIT 1) >
                (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM leasestore_fencing_seq), false)`

// repairSequenceSQL moves leasestore_fencing_seq past every token in
// leasestore_leases (tombstones keep each key's last token there) and past
// the newest audit record's. setval never moves it backwards here: it runs
// only when the sequence is below the greatest of those.
const repairSequenceSQL = `
SELECT setval('leasestore_fencing_seq', m.token)
FROM (SELECT greatest((SELECT max(token) FROM leasestore_leases),
                      (SELECT a.token FROM leasestore_audit a ORDER BY a.id DESC LIMIT 1)) AS token) AS m
WHERE m.token > (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM leasestore_fencing_seq)`
