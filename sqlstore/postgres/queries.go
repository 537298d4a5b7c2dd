package postgres

// Every statement the backend sends lives in this file (the end of a
// lock-delay, which migrate down's check shares, in
// migrations.PostgresDelayEnds). Parameters are named
// (see statement.go), with the same name in every statement: @ns, @name,
// @owner, @token, @ttl (an interval), @request_id, @params_hash, @actor,
// @reason, @now (the injected test clock, or NULL for the server's clock:
// now() to judge a snapshot, clock_timestamp() after the key's lock for the
// time a change records, see lockCTE),
// @lease_version and @record_version (the format versions this release
// writes and reads). How the statements stay one round trip, what their
// snapshots see and how audit ids are made is in the package doc.
//
// Time arithmetic never depends on the session's TimeZone (the server's
// timezone, a role's or the DSN's): adding an interval's days or months to
// a timestamptz counts calendar days in that zone, 23h or 25h across a
// daylight-saving change. The intervals bound from Go (@ttl, @lock_delay,
// @grace, @slack, and the lock_delay column written from @lock_delay)
// carry microseconds only, which add as elapsed time; the one interval
// made in SQL, a lease's own TTL, is added in UTC (keptExpiry).
//
// A statement that names a key finds its row through the primary key
// alone. Where it also names the holder, it compares the owner as
// (l.owner = @owner) IS TRUE, the same test for a NOT NULL column, which
// no index can serve: the owner index, made for lists by owner, holds the
// name after a column a key look-up cannot use, and a planner without
// statistics (a table never analyzed, as under autovacuum=off) chose it
// and read every row the holder ever had in the namespace
// (TestKeyChangesDoNotScanTheOwnersRows). One case is left: a generic
// plan made while the table was analyzed empty sees the primary key and
// the live index at exactly the same cost and keeps the live index,
// reading the namespace's entries in it, until the next ANALYZE (see
// enable_seqscan in pinSettingsSQL).

import "github.com/leasestore/leasestore/migrations"

// outcomeColumns is the select list every state-changing statement ends
// with; Backend.runChange reads it:
//
//	now
//	owner, token, acquired_at, renewed_at, expires_at, version, lock_delay:
//	       the row as changed (for acquire: or as locked by ON CONFLICT);
//	       NULLs if none
//	fresh: the token drawn for this acquire (NULL for other operations)
//	outcome: when no row came back, leasestore_outcome's JSON, read in the
//	       statement's snapshot, or, when the write met a change that
//	       committed after that snapshot, leasestore_outcome_fresh's, the
//	       same read in the newest committed state (migration 9); else
//	       NULL (and when the row came back without its audit record,
//	       the statement fails: recordMissingSQL)
//
// The audit record's id is the writer's transaction id plus the era's
// offset (the lateral subquery next). It must sort after every record the
// snapshot sees: always true on the cluster that wrote them, since a
// transaction id is assigned after the snapshot; false after a move to a
// cluster whose ids start lower, which leasestore_audit_went_back reports
// as SQLSTATE LS001. A server connection checks that once, against the
// newest record, and remembers that it passed in a session setting
// (leasestore.audit_ids_checked), as the era table's oid and offset; later
// statements on it skip the look-up. A move means new server connections
// (behind a transaction pooler too, which opens its own to the new
// cluster); a restore into this cluster makes a new era table, and a new
// era changes the offset: each checks again. It runs only when the change
// happened.

// recordCTE is the CTE rec of a state-changing statement: the audit record
// of the change the statement's CTE after returned (none when it returned
// no row), of operation op with status status, written at the SQL
// expression at, on behalf of actor, for reason, with the lease's
// lock-delay (NULL when none; migration 5), returning its id. Its id is
// made and checked as outcomeColumns says. It writes nothing when the
// session sees no row of leasestore_audit_era (row-level security on it,
// or the row deleted), and a trigger may drop what it writes: the
// statement then fails (recordMissingSQL).
func recordCTE(op, status, at, actor, reason string) string {
	return `rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at, acquired_at, renewed_at, lock_delay)
    SELECT CASE WHEN next.checked THEN next.id
                WHEN next.id > coalesce((SELECT max(a.id) FROM leasestore_audit a), 0)
                     AND set_config('leasestore.audit_ids_checked', next.mark, false) IS NOT NULL THEN next.id
                ELSE leasestore_audit_went_back() END,
           ` + at + `, '` + op + `', @ns, @name, after.owner, after.token, @request_id, ` + actor + `, ` + reason + `,
           '` + status + `', @record_version, @params_hash, after.expires_at, after.acquired_at, after.renewed_at,
           nullif(after.lock_delay, interval '0')
    FROM after
    CROSS JOIN LATERAL (SELECT pg_current_xact_id()::text::bigint + e.id_offset AS id, m.mark,
                               current_setting('leasestore.audit_ids_checked', true) IS NOT DISTINCT FROM m.mark AS checked
                        FROM leasestore_audit_era e, LATERAL (SELECT e.tableoid || '/' || e.id_offset AS mark) AS m) AS next
    RETURNING id
)`
}

// recordMissingSQL fails the statement it is evaluated in, with SQLSTATE
// 42704 naming recordMissingSetting, which interpretError tells by that
// name. Every state-changing statement evaluates it when its change came
// back and its audit record did not (rec returned no row), so that the
// change is never committed without the record a retry of its request id
// is answered from (TestChangesAreNeverCommittedWithoutTheirRecord). It
// reads a setting that cannot exist: a name without a dot that the server
// does not define, which no SET, role or configuration file can give a
// value. recordMissingSQL is text; cast it to the type its place needs.
const (
	recordMissingSetting = "leasestore: no audit record was written"
	recordMissingSQL     = `current_setting('` + recordMissingSetting + `')`
)

// Lock-delays (migration 4). leaseDelay(a) is the lock-delay of the lease
// in row a, as every statement shows it: lock_delay while delay_token is
// the row's token, or minus it after a revoke. delayEnds(a) is when the
// lock-delay that keeps the key of row a from acquires ends (see
// [migrations.PostgresDelayEnds], which the check of migrate down shares).
func leaseDelay(a string) string {
	return `CASE WHEN abs(` + a + `.delay_token) = ` + a + `.token THEN ` + a + `.lock_delay ELSE interval '0' END`
}

func delayEnds(a string) string { return migrations.PostgresDelayEnds(a) }

// wakeCTE wakes the waiters of the key whose lease the statement's CTE
// after ended, only when one is registered in the key's bucket (hashtext
// & waitLockMask, as notify.go's waitLockSQL): see notify.go.
const wakeCTE = `wake AS MATERIALIZED (
    SELECT pg_notify('leasestore_wake', json_build_array(current_schema(), @ns::text, @name::text)::text)
    FROM after
    WHERE NOT pg_try_advisory_xact_lock(1818583412, hashtext(@ns || '/' || @name) & ` + waitLockMask + `)
)`

// lockCTE takes the key's writer lock (the advisory lock every writer of
// the key takes, in its class 1818583411), then the lock on the key's row
// (as the change's UPDATE would: any session may hold it, a DBA's SELECT
// ... FOR UPDATE, a sweeper), and only then reads the time the change
// takes effect: the injected test clock, or the server's clock_timestamp()
// after both waits. now() is the transaction's start, before any wait, and
// a change recorded at it, or at a time read before the row's wait, would
// start, end or extend a lease in the past, or renew one that expired
// while it waited (TestChangeTimesFollowLockWaits,
// TestChangeTimesFollowRowLockWaits). The row lock's LockRows node sits
// above the join with keylock, so it locks after the advisory lock (the
// order every writer takes them in); lock joins keylock too, so the
// advisory lock is taken also when the key has no row (the join in
// rowlock then never reads keylock), and reads the clock in its select
// list, after its inputs were computed.
const lockCTE = `keylock AS MATERIALIZED (
    SELECT
    WHERE pg_advisory_xact_lock(1818583411, hashtext(@ns || '/' || @name)) IS NOT NULL
), ` + rowLockCTE + `, lock AS MATERIALIZED (
    SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM keylock, (SELECT count(*) FROM rowlock) AS held
)`

// rowLockCTE locks the key's row, if it has one, once keylock has a row
// (see lockCTE).
const rowLockCTE = `rowlock AS MATERIALIZED (
    SELECT FROM leasestore_leases l, keylock WHERE l.namespace = @ns AND l.name = @name FOR NO KEY UPDATE OF l
)`

// holderChange is the condition on which renewSQL and releaseSQL change
// the key's row l (after lockCTE): the live lease (@owner, @token) of this
// release's format, and the request id new. revokeChange is revokeSQL's:
// the live lease (the one with @token unless @token is 0). Each is
// written once, for the statement's UPDATE and its racedCTE alike.
const (
	holderChange = `l.namespace = @ns AND l.name = @name AND (l.owner = @owner) IS TRUE AND l.token = @token
      AND l.expires_at > lock.now AND l.ended_token IS DISTINCT FROM l.token
      AND l.version = @lease_version
      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = @ns AND a.request_id = @request_id)`
	revokeChange = `l.namespace = @ns AND l.name = @name
      AND (@token::bigint = 0 OR l.token = @token)
      AND l.expires_at > lock.now AND l.ended_token IS DISTINCT FROM l.token
      AND l.version = @lease_version
      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = @ns AND a.request_id = @request_id)`
)

// racedCTE is the CTE raced of renewSQL, releaseSQL and revokeSQL: the
// key's row in the statement's snapshot when it meets cond, the condition
// of the statement's UPDATE. The UPDATE re-checks cond on the row's newest
// version, so a row in raced while the UPDATE changed none means another
// writer changed the key after the snapshot, and committed before the
// statement was granted the key's lock: the outcome is then read in the
// newest committed state, by leasestore_outcome_fresh, which shows that
// change (changeResultSQL). Read only when no row came back.
func racedCTE(cond string) string {
	return `raced AS (
    SELECT FROM leasestore_leases l, lock WHERE ` + cond + `
)`
}

// changeResultSQL ends renewSQL: outcomeColumns, with no token drawn,
// failing the statement when the change came back without its record
// (recordMissingSQL). endedResultSQL ends releaseSQL and revokeSQL the
// same way, after their wakeCTE.
const (
	changeResultSQL = `
SELECT (SELECT lock.now FROM lock),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version, after.lock_delay,
       NULL::bigint,
       CASE WHEN after.token IS NULL AND NOT EXISTS (SELECT FROM raced) THEN leasestore_outcome(@ns, @name, @request_id)
            WHEN after.token IS NULL THEN leasestore_outcome_fresh(@ns, @name, @request_id)
            WHEN NOT EXISTS (SELECT FROM rec) THEN ` + recordMissingSQL + `::json END
FROM (SELECT) AS one
LEFT JOIN after ON true`
	endedResultSQL = changeResultSQL + `
LEFT JOIN wake ON true`
)

// keyFloorSQL is the token an acquire's must exceed, besides the
// sequence's next value: the key's last token (its row, in prev), or, for
// a key with no row (never taken, or swept), the greatest token the table
// holds. The sweep never removes the row holding that token (see sweepSQL),
// so it is at least every token ever issued, the swept key's included: a
// sequence set back under a running backend (a switchover, a DBA's setval)
// cannot give a swept key a token it had. PostgreSQL evaluates the second
// sub-select only when the first is NULL (an InitPlan runs when first
// read), and then as one backward step of leasestore_leases_token: a key
// with a row pays nothing.
const keyFloorSQL = `coalesce((SELECT prev.token FROM prev), (SELECT max(t.token) FROM leasestore_leases t), 0)`

// acquireSQL takes the key when the snapshot shows it free (no row, an
// expired lease, or a tombstone: the row of a released or revoked lease,
// kept so that the key's last token stays known) and the request id is
// new. A row is a tombstone while ended_token equals its token (see
// releaseSQL); the statements test that, not the time, since the now() of
// a statement that began before a release committed may precede it. A
// lock-delay (see delayEnds) keeps the key until it ends, and is tested by
// time. The token is the greater of the sequence's next
// value and keyFloorSQL plus one, so the tokens of a key increase
// whatever the sequence's state; it and the lease's start (at: the server's
// clock_timestamp(), see lockCTE) are read after the key's lock (keylock,
// taken only when the snapshot shows the key free and the request id new)
// and its row's (rowLockCTE), in the select list of fresh. When the key changed after our snapshot,
// our INSERT meets its newest row: ON CONFLICT waits for it, locks it and
// takes it only if it is still free and its token below ours. So a row
// comes back exactly when the acquire took effect; none with a drawn token
// means the key changed after the snapshot (another acquire, a copy of
// this request, or a lease taken and given up), which the snapshot does not
// show: the outcome is then leasestore_outcome_fresh's, read in the newest
// committed state while the statement holds the key's lock (the other
// writer committed before it was granted), so it shows the change the
// INSERT met. Backend.Acquire answers from it (conflict, a replay); only a
// key free in it, whose token the drawn one is not above (the sequence
// behind the key: cached, restored), needs the statement to run again.
var acquireSQL = compile(`
WITH prev AS (
    SELECT l.token, l.expires_at, l.version, l.ended_token, ` + delayEnds("l") + ` AS delay_ends
    FROM leasestore_leases l WHERE l.namespace = @ns AND l.name = @name
), keylock AS MATERIALIZED (
    SELECT
    WHERE NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = @ns AND a.request_id = @request_id)
      AND NOT EXISTS (SELECT FROM prev
                      WHERE (prev.ended_token IS DISTINCT FROM prev.token
                             AND prev.expires_at > coalesce(@now::timestamptz, now()))
                         OR prev.delay_ends > coalesce(@now::timestamptz, now())
                         OR prev.version <> @lease_version)
      AND pg_advisory_xact_lock(1818583411, hashtext(@ns || '/' || @name)) IS NOT NULL
), ` + rowLockCTE + `, fresh AS (
    SELECT greatest(nextval('leasestore_fencing_seq'), ` + keyFloorSQL + ` + 1) AS token,
           coalesce(@now::timestamptz, clock_timestamp()) AS at
    FROM keylock, (SELECT count(*) FROM rowlock) AS held
), after AS (
    INSERT INTO leasestore_leases AS l (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version,
                                        lock_delay, delay_token)
    SELECT @ns, @name, @owner, fresh.token, fresh.at, fresh.at, fresh.at + @ttl::interval, @lease_version,
           @lock_delay::interval, CASE WHEN @lock_delay::interval > interval '0' THEN fresh.token END
    FROM fresh
    ON CONFLICT (namespace, name) DO UPDATE SET
        owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
        renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
        ended_token = NULL, ended_expiry = NULL, lock_delay = excluded.lock_delay, delay_token = excluded.delay_token
    WHERE l.version = @lease_version AND l.token < excluded.token
      AND CASE WHEN (` + delayEnds("l") + `) IS NULL THEN l.ended_token = l.token OR l.expires_at <= excluded.acquired_at
               ELSE (` + delayEnds("l") + `) <= excluded.acquired_at END
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version, ` + leaseDelay("l") + ` AS lock_delay
), ` + recordCTE("acquire", "acquired", "after.acquired_at", "@owner", "''") + `
SELECT coalesce(fresh.at, @now::timestamptz, now()),
       after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version, after.lock_delay,
       fresh.token,
       CASE WHEN after.token IS NULL AND fresh.token IS NULL THEN leasestore_outcome(@ns, @name, @request_id)
            WHEN after.token IS NULL THEN leasestore_outcome_fresh(@ns, @name, @request_id)
            WHEN NOT EXISTS (SELECT FROM rec) THEN ` + recordMissingSQL + `::json END
FROM (SELECT) AS one
LEFT JOIN after ON true
LEFT JOIN fresh ON true`)

// keptExpiry is the expiry of a lease in row l renewed at now (an
// expression) for ttl (an interval bound from Go), or, when ttl is zero,
// for the lease's own TTL, expires_at - renewed_at. That difference
// counts every 24h as a day, and now + a day in the session's TimeZone is
// a calendar day there (23h or 25h across a daylight-saving change), so
// the sum is made in UTC, where a day is 24h
// (TestRenewWithoutTTLKeepsTheTTLAcrossADaylightSavingChange). renewSQL
// and the batch function share it.
func keptExpiry(now, ttl string) string {
	return `((` + now + ` AT TIME ZONE 'UTC') + CASE WHEN ` + ttl + ` = interval '0' THEN l.expires_at - l.renewed_at ELSE ` +
		ttl + ` END) AT TIME ZONE 'UTC'`
}

// renewSQL extends the live lease (@owner, @token) by @ttl from the time
// after the key's lock (lockCTE), judging it live at that time; a zero
// @ttl keeps the lease's own (expires_at - renewed_at, see keptExpiry). It clears
// swept_token: a sweeper that does not take the key's lock may have set the
// row aside meanwhile, and the renewed lease must be back in the live
// indexes. Clearing a NULL changes nothing the
// indexes read, so the update can stay on its page.
var renewSQL = compile(`
WITH ` + lockCTE + `, after AS (
    UPDATE leasestore_leases l
    SET renewed_at = lock.now,
        expires_at = ` + keptExpiry("lock.now", "@ttl::interval") + `,
        swept_token = NULL
    FROM lock
    WHERE ` + holderChange + `
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version, ` + leaseDelay("l") + ` AS lock_delay
), ` + racedCTE(holderChange) + `, ` + recordCTE("renew", "renewed", "after.renewed_at", "@owner", "''") + changeResultSQL)

// releaseSQL gives up the live lease (@owner, @token), and notifies
// waiters of the key if there are any (the wake CTE; see notify.go). The row stays as a
// tombstone: ended_token marks it (a tombstone while it equals token; an
// acquire, of this release or an older one, changes token), expires_at
// becomes now and the expiry it had moves to ended_expiry, so that
// RETURNING gives the lease as released. No indexed column changes, so the
// update can stay on its page (HOT).
var releaseSQL = compile(`
WITH ` + lockCTE + `, after AS (
    UPDATE leasestore_leases l
    SET ended_token = l.token, ended_expiry = l.expires_at, expires_at = lock.now
    FROM lock
    WHERE ` + holderChange + `
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.ended_expiry AS expires_at, l.version,
              ` + leaseDelay("l") + ` AS lock_delay
), ` + racedCTE(holderChange) + `, ` + recordCTE("release", "released", "(SELECT lock.now FROM lock)", "@owner", "''") + `, ` + wakeCTE + endedResultSQL)

// revokeSQL ends the live lease at the key (only the one with @token unless
// @token is 0) on behalf of @actor, leaving a tombstone and waking waiters
// like release. A lease with a lock-delay leaves it running on the
// tombstone (delay_token = -token, see delayEnds).
var revokeSQL = compile(`
WITH ` + lockCTE + `, after AS (
    UPDATE leasestore_leases l
    SET ended_token = l.token, ended_expiry = l.expires_at, expires_at = lock.now,
        delay_token = CASE WHEN l.delay_token = l.token THEN -l.token ELSE l.delay_token END
    FROM lock
    WHERE ` + revokeChange + `
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.ended_expiry AS expires_at, l.version,
              ` + leaseDelay("l") + ` AS lock_delay
), ` + racedCTE(revokeChange) + `, ` + recordCTE("revoke", "revoked", "(SELECT lock.now FROM lock)", "@actor", "@reason") + `, ` + wakeCTE + endedResultSQL)

// getSQL always returns one row: the clock, the key's lease (NULLs when
// there is none, or only a tombstone other than a revoke's that keeps a
// lock-delay: delay_token = -token, see delayEnds) and whether the row is
// that tombstone (ended: its expires_at is the revoke's time; told by the
// tokens, not the time, as in acquireSQL). Expiry and the end of a
// lock-delay are judged in Go.
var getSQL = compile(`
SELECT clock.now, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version, ` + leaseDelay("l") + `,
       l.ended_token IS NOT DISTINCT FROM l.token
FROM (SELECT coalesce(@now::timestamptz, now()) AS now) AS clock
LEFT JOIN leasestore_leases l ON l.namespace = @ns AND l.name = @name
      AND (l.ended_token IS DISTINCT FROM l.token OR l.delay_token = -l.token)`)

// listSQL pages through the live leases of @ns by name: names starting
// with @prefix, after @after ("" for the first page; names are never
// empty), at most @limit rows. It reads the live range of the live index
// (rows the sweeper has not set aside, see migration 3), so rows of ended
// leases cost nothing once set aside; the "C" collation of name makes the
// order bytewise and lets the index serve both the prefix range (name >=
// prefix) and the keyset condition. Tombstones and leases expired but not
// yet set aside are filtered out.
var listSQL = compile(`
SELECT l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version, ` + leaseDelay("l") + `
FROM leasestore_leases l
WHERE l.namespace = @ns
  AND l.name >= @prefix AND starts_with(l.name, @prefix)
  AND l.name > @after
  AND l.swept_token IS DISTINCT FROM l.token
  AND l.ended_token IS DISTINCT FROM l.token
  AND l.expires_at > coalesce(@now::timestamptz, now())
ORDER BY l.name
LIMIT @limit`)

// listOwnerSQL is listSQL for one @owner, through the live owner index.
var listOwnerSQL = compile(`
SELECT l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version, ` + leaseDelay("l") + `
FROM leasestore_leases l
WHERE l.owner = @owner AND l.namespace = @ns
  AND l.name >= @prefix AND starts_with(l.name, @prefix)
  AND l.name > @after
  AND l.swept_token IS DISTINCT FROM l.token
  AND l.ended_token IS DISTINCT FROM l.token
  AND l.expires_at > coalesce(@now::timestamptz, now())
ORDER BY l.name
LIMIT @limit`)

// listAllSQL is listSQL with expired leases too (never tombstones): it
// reads the namespace's range of the primary key, set-aside rows included.
var listAllSQL = compile(`
SELECT l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version, ` + leaseDelay("l") + `
FROM leasestore_leases l
WHERE l.namespace = @ns
  AND l.name >= @prefix AND starts_with(l.name, @prefix)
  AND l.name > @after
  AND l.ended_token IS DISTINCT FROM l.token
ORDER BY l.name
LIMIT @limit`)

// listOwnerAllSQL is listAllSQL for one @owner, through the (owner,
// namespace) prefix of the live owner index.
var listOwnerAllSQL = compile(`
SELECT l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version, ` + leaseDelay("l") + `
FROM leasestore_leases l
WHERE l.owner = @owner AND l.namespace = @ns
  AND l.name >= @prefix AND starts_with(l.name, @prefix)
  AND l.name > @after
  AND l.ended_token IS DISTINCT FROM l.token
ORDER BY l.name
LIMIT @limit`)

// namespacesSQL returns up to @limit namespaces after @after that hold a
// live lease, in byte order: a skip scan of the live index, one probe per
// namespace (a recursive CTE; the LIMIT stops the recursion).
var namespacesSQL = compile(`
WITH RECURSIVE ns(namespace) AS (
    (SELECT l.namespace FROM leasestore_leases l
     WHERE l.namespace > @after
       AND l.swept_token IS DISTINCT FROM l.token AND l.ended_token IS DISTINCT FROM l.token
       AND l.expires_at > coalesce(@now::timestamptz, now())
     ORDER BY l.namespace LIMIT 1)
    UNION ALL
    SELECT (SELECT l.namespace FROM leasestore_leases l
            WHERE l.namespace > ns.namespace
              AND l.swept_token IS DISTINCT FROM l.token AND l.ended_token IS DISTINCT FROM l.token
              AND l.expires_at > coalesce(@now::timestamptz, now())
            ORDER BY l.namespace LIMIT 1)
    FROM ns WHERE ns.namespace IS NOT NULL
)
SELECT namespace FROM ns WHERE namespace IS NOT NULL LIMIT @limit`)

// readAuditSQL pages through the trail by id after @after, oldest first, in
// @ns ("" for all), at or after @since (NULL for all), of the ops @ops (an
// empty array for all) and of owner @owner ("" for all), at most @limit
// records. A follower (@follow) reads only below the horizon: the oldest
// transaction in progress, as an id (see the package doc). The first row
// carries the horizon and whether a committed record at or above it is held
// back, (from a cursor, @from_cursor, a1.0 included, or for a follower) the
// greatest id a prune removed in @ns (migration 7) and the id of the last
// prune batch that removed records of the whole trail, whatever @ns
// (migration 11), read in the same snapshot as the page, and how far
// a follower's page passed: the greatest id below the horizon that the
// snapshot sees, so that a follower of a filtered query reads on past the
// records it does not select without passing one held back (every id below
// the horizon is settled), and the greatest id a record can have had when
// the statement began (below the next transaction's; -1 on a hot standby,
// which may lag the primary that issued a cursor): no cursor this store
// issued lies past it (audit.CheckCursorEnd); a page with no records is
// that one row with NULL record columns. A
// first page with @since starts after sinceStartSQL's id, not at the start
// of the trail. readAuditKeySQL is the same for the key (@ns, @name),
// through the key index. Neither op nor owner has an index: the read walks
// the primary key (or the key index) in id order and filters, so a rare op
// or owner reads further to fill a page, as a namespace filter does; the
// page stays bounded by @limit.
var readAuditSQL = compile(`
WITH h AS MATERIALIZED (
    SELECT x.horizon, x.top >= greatest(x.horizon, @after::bigint + 1) AS held,
           coalesce(m.through, 0) AS pruned, coalesce(m.pruned_by, 0) AS pruned_by,
           least(x.horizon - 1, x.top) AS passed, x.last_id
    FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint + e.id_offset AS horizon,
                 coalesce((SELECT max(a.id) FROM leasestore_audit a), 0) AS top,
                 CASE WHEN pg_is_in_recovery() THEN -1
                      ELSE pg_snapshot_xmax(pg_current_snapshot())::text::bigint + e.id_offset - 1 END AS last_id
          FROM leasestore_audit_era e) AS x
    LEFT JOIN LATERAL (SELECT m.through, m.pruned_by FROM leasestore_audit_pruned_mark(@ns) AS m
                       WHERE @from_cursor::boolean OR @follow::boolean) AS m ON true
)
SELECT h.horizon, h.held, h.pruned, h.pruned_by, h.passed, h.last_id, a.id, a.at, a.op, a.namespace, a.name, a.owner, a.token, a.request_id, a.actor,
       a.reason, a.status, a.version, a.expires_at
FROM h
LEFT JOIN LATERAL (
    SELECT a.* FROM leasestore_audit a
    WHERE a.id > @after
      AND (@since::timestamptz IS NULL OR a.at >= @since)
      AND (NOT @follow::boolean OR a.id < h.horizon)
      AND (@ns::text = '' OR a.namespace = @ns)
      AND (coalesce(cardinality(@ops::text[]), 0) = 0 OR a.op = ANY(@ops::text[]))
      AND (@owner::text = '' OR a.owner = @owner)
    ORDER BY a.id
    LIMIT @limit
) AS a ON true
ORDER BY a.id`)

var readAuditKeySQL = compile(`
WITH h AS MATERIALIZED (
    SELECT x.horizon, x.top >= greatest(x.horizon, @after::bigint + 1) AS held,
           coalesce(m.through, 0) AS pruned, coalesce(m.pruned_by, 0) AS pruned_by,
           least(x.horizon - 1, x.top) AS passed, x.last_id
    FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint + e.id_offset AS horizon,
                 coalesce((SELECT max(a.id) FROM leasestore_audit a), 0) AS top,
                 CASE WHEN pg_is_in_recovery() THEN -1
                      ELSE pg_snapshot_xmax(pg_current_snapshot())::text::bigint + e.id_offset - 1 END AS last_id
          FROM leasestore_audit_era e) AS x
    LEFT JOIN LATERAL (SELECT m.through, m.pruned_by FROM leasestore_audit_pruned_mark(@ns) AS m
                       WHERE @from_cursor::boolean OR @follow::boolean) AS m ON true
)
SELECT h.horizon, h.held, h.pruned, h.pruned_by, h.passed, h.last_id, a.id, a.at, a.op, a.namespace, a.name, a.owner, a.token, a.request_id, a.actor,
       a.reason, a.status, a.version, a.expires_at
FROM h
LEFT JOIN LATERAL (
    SELECT a.* FROM leasestore_audit a
    WHERE a.name = @name AND a.namespace = @ns
      AND a.id > @after
      AND (@since::timestamptz IS NULL OR a.at >= @since)
      AND (NOT @follow::boolean OR a.id < h.horizon)
      AND (coalesce(cardinality(@ops::text[]), 0) = 0 OR a.op = ANY(@ops::text[]))
      AND (@owner::text = '' OR a.owner = @owner)
    ORDER BY a.id
    LIMIT @limit
) AS a ON true
ORDER BY a.id`)

// readAuditNewestSQL is readAuditSQL newest first: the records below
// @before (the cursor's id), and above @floor (sinceStartSQL's id with
// @since, else 0, so a read with @since stops where older records begin),
// by id descending. It has no follower's form (a follower reads oldest
// first), so its horizon and passed columns are 0 and nothing is held back,
// its last_id -1 (nothing checked),
// its pruned and pruned_by columns 0 (reading back from a cursor meets no gap a prune left), and a page
// with no records has no row. readAuditKeyNewestSQL is the same for the key
// (@ns, @name), through the key index read backwards.
var readAuditNewestSQL = compile(`
SELECT 0::bigint AS horizon, false AS held, 0::bigint AS pruned, 0::bigint AS pruned_by, 0::bigint AS passed, -1::bigint AS last_id, a.id, a.at, a.op, a.namespace, a.name, a.owner, a.token, a.request_id,
       a.actor, a.reason, a.status, a.version, a.expires_at
FROM leasestore_audit a
WHERE a.id < @before AND a.id > @floor
  AND (@since::timestamptz IS NULL OR a.at >= @since)
  AND (@ns::text = '' OR a.namespace = @ns)
  AND (coalesce(cardinality(@ops::text[]), 0) = 0 OR a.op = ANY(@ops::text[]))
  AND (@owner::text = '' OR a.owner = @owner)
ORDER BY a.id DESC
LIMIT @limit`)

var readAuditKeyNewestSQL = compile(`
SELECT 0::bigint AS horizon, false AS held, 0::bigint AS pruned, 0::bigint AS pruned_by, 0::bigint AS passed, -1::bigint AS last_id, a.id, a.at, a.op, a.namespace, a.name, a.owner, a.token, a.request_id,
       a.actor, a.reason, a.status, a.version, a.expires_at
FROM leasestore_audit a
WHERE a.name = @name AND a.namespace = @ns
  AND a.id < @before AND a.id > @floor
  AND (@since::timestamptz IS NULL OR a.at >= @since)
  AND (coalesce(cardinality(@ops::text[]), 0) = 0 OR a.op = ANY(@ops::text[]))
  AND (@owner::text = '' OR a.owner = @owner)
ORDER BY a.id DESC
LIMIT @limit`)

// sinceStartSQL finds where a read of the records at or after @since may
// start: an id below which no record is at or after @since, whatever the
// server's clock did. Ids follow the order in which writers got their
// transaction ids; a record's time is its statement's start, at most a
// statement's run time (@slack) before that, as long as the clock does not
// step back. A binary search over ids (about 30 index probes, however long
// the trail) finds a record older than @since - @slack close to the
// boundary (or none: then 0, the start of the trail); hi is an exclusive
// bound, and every step halves [lo, hi). A clock that stepped back leaves
// records older than @since after newer ones, so the search may land past
// some of them: the statement then asks for the first record at or before
// lo that is at or after @since, and starts before it. The BRIN indexes on
// times and ids answer that together (migration 12), reading only the
// block ranges that hold both, in an ordinary trail the one where the
// search landed. Two things hold the planner to them: min with a FILTER,
// which it does not turn into a walk of the primary key in id order, and
// bounds it cannot read before it runs (lo and since from the
// materialized start, and a time range closed by 'infinity'), so that its
// plan is the same with or without the values and the time range looks
// narrow, as it is in the ranges the id index leaves.
var sinceStartSQL = compile(`
WITH RECURSIVE search AS (
    SELECT e.lo, e.hi, 0 AS step
    FROM (SELECT (SELECT min(id) FROM leasestore_audit) AS lo, (SELECT max(id) FROM leasestore_audit) + 1 AS hi) AS e
    WHERE e.lo IS NOT NULL
      AND (SELECT a.at FROM leasestore_audit a WHERE a.id = e.lo) < @since::timestamptz - @slack::interval
    UNION ALL
    SELECT CASE WHEN m.at < @since::timestamptz - @slack::interval THEN m.id ELSE s.lo END,
           CASE WHEN m.at < @since::timestamptz - @slack::interval THEN s.hi ELSE s.lo + (s.hi - s.lo) / 2 END,
           s.step + 1
    FROM search s
    CROSS JOIN LATERAL (SELECT a.id, a.at FROM leasestore_audit a
                        WHERE a.id >= s.lo + (s.hi - s.lo) / 2 ORDER BY a.id LIMIT 1) AS m
    WHERE s.hi - s.lo > 1 AND s.step < 100
),
start AS MATERIALIZED (
    SELECT coalesce((SELECT lo FROM search ORDER BY step DESC LIMIT 1), 0) AS lo, @since::timestamptz AS since
)
SELECT least(s.lo, (SELECT min(a.id) FILTER (WHERE true) - 1 FROM leasestore_audit a
                    WHERE a.id <= s.lo AND a.at >= s.since AND a.at <= 'infinity'::timestamptz))
FROM start s`)

// newEraSQL moves audit ids past every existing record after a move to
// another cluster (see the migration's leasestore_audit_new_era).
const newEraSQL = `SELECT leasestore_audit_new_era()`

// schemaSQL reads the connection's current schema, whether goose's
// version table exists in it (the same test goose makes), and the first
// schema of the search_path before it (or anywhere in it, when there is
// none) that exists but that the session's role may not use (NULL when
// none): current_schema() passes over such a schema. The search_path is
// split as the server splits it (commas, "$user", double quotes, unquoted
// names folded to lower case), but for a comma inside a quoted name.
const schemaSQL = `
WITH path AS (
    SELECT p.i, CASE WHEN e.s IN ('$user', '"$user"') THEN current_user::text
                     WHEN e.s LIKE '"%"' THEN replace(substr(e.s, 2, length(e.s) - 2), '""', '"')
                     ELSE lower(e.s) END AS name
    FROM regexp_split_to_table(current_setting('search_path'), ',') WITH ORDINALITY AS p(entry, i)
    CROSS JOIN LATERAL (SELECT btrim(p.entry) AS s) AS e
)
SELECT current_schema(),
       EXISTS (SELECT FROM pg_catalog.pg_tables
               WHERE schemaname = current_schema() AND tablename = 'leasestore_goose_db_version'),
       (SELECT n.nspname
        FROM path JOIN pg_catalog.pg_namespace n ON n.nspname = path.name
        WHERE NOT pg_catalog.has_schema_privilege(n.oid, 'USAGE')
          AND path.i < coalesce((SELECT min(c.i) FROM path c WHERE c.name = current_schema()), 2147483647)
        ORDER BY path.i LIMIT 1)`

// schemaVersionSQL reads the applied migration version: goose deletes a
// version's row when it rolls it back, so the maximum is the current one.
const schemaVersionSQL = `SELECT coalesce(max(version_id), 0) FROM leasestore_goose_db_version`

// schemaCompatSQL reads the oldest release schema version that can serve
// this (newer) schema; see migrations/postgres/00002.
const schemaCompatSQL = `SELECT oldest_serving_version FROM leasestore_compat WHERE id = 1`

// pinSettingsSQL runs on every connection of a pool that Open makes (and
// on the listener's), and pins the session settings whose other values
// change what operations answer, whatever the role, the database or the
// DSN say, when the connection reaches the server directly: when $1, the
// process id the connection was given, is the server's (or is NULL). It
// returns that, and pins nothing otherwise (a pooler is in front: a SET
// would stay on a server connection other clients use; see pooler.go).
//
//   - default_transaction_isolation read committed: the statements
//     re-check their conditions on the newest row version, as read
//     committed does, instead of failing to serialize.
//   - lock_timeout 0: an operation waits for its key's lock as long as its
//     deadline allows; a role's lock_timeout of a few milliseconds made
//     operations that waited a moment answer timeout (SQLSTATE 55P03).
//   - idle_in_transaction_session_timeout 0: a prune's transaction of
//     several statements is not cut between them (which ends the session).
//   - idle_session_timeout 0 (PostgreSQL 14 and later; absent before): it
//     would end idle pooled connections and the listener's, whose waiters
//     would then all be woken for nothing.
//   - jit off: the statements are short and run by the thousand: compiling
//     one costs more than it could save, and a generic plan's estimates
//     can trigger it.
//   - statement_timeout $2 unless NULL (the DSN set one): no statement of
//     the backend runs longer than statementTimeout, which bounds how far a
//     record's time may lag its place in the trail (see sinceStartSQL).
//   - enable_seqscan off: every statement that names a key or a request id
//     has an index for it, and a connection keeps the generic plan it made
//     after five executions until the tables' statistics change. Made
//     while they were analyzed empty (a fresh store, a trail pruned to
//     nothing), a plan that reads a whole table is the cheapest, and it
//     went on reading the growing trail and leases for every operation
//     until autovacuum analyzed them again
//     (TestPlansIgnoreStatisticsOfEmptyTables). Off only penalizes a full
//     scan: a table no index serves is still read, as the sweep reads
//     the leases for ended ones (`leasectl gc --grace 0s` of 300,000
//     expired rows inserted directly: 1.8 s, 2.3 s with it on, two runs
//     each: its removal now joins through the primary key).
//   - synchronous_commit raised to on unless already at least that
//     (remote_write, remote_apply are kept): a crash must not lose a
//     committed acquire, whose token could be issued again.
const pinSettingsSQL = `
SELECT pin.direct,
       CASE WHEN pin.direct THEN concat(
           set_config('default_transaction_isolation', 'read committed', false),
           set_config('lock_timeout', '0', false),
           set_config('idle_in_transaction_session_timeout', '0', false),
           set_config('jit', 'off', false),
           set_config('enable_seqscan', 'off', false),
           CASE WHEN $2::text IS NOT NULL THEN set_config('statement_timeout', $2::text, false) END,
           CASE WHEN current_setting('synchronous_commit') IN ('off', 'local')
                THEN set_config('synchronous_commit', 'on', false) END,
           CASE WHEN current_setting('idle_session_timeout', true) <> '0'
                THEN set_config('idle_session_timeout', '0', false) END) END
FROM (SELECT $1::bigint IS NULL OR pg_backend_pid() = $1::bigint AS direct) AS pin`

// backendPIDSQL reads the server process id of a connection, to compare
// with the one the connection was given (ThroughPooler).
const backendPIDSQL = `SELECT pg_backend_pid()`

// windowCutOffSQL is the cut-off of the prune window's row w as text: RFC
// 3339 in UTC, with microseconds (whatever the session's DateStyle and
// TimeZone), or infinity, -infinity.
const windowCutOffSQL = `CASE WHEN isfinite(w.before)
    THEN to_char(w.before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') ELSE w.before::text END`

// settingsSQL reads what checkSettings judges: synchronous_commit; the
// fencing sequence's cache, increment, whether it cycles, its MINVALUE and
// MAXVALUE (pg_sequence); whether it is behind a token in
// leasestore_leases or the newest audit record's (it lost its state; the
// leases hold the greatest token ever issued, see sweepSQL, which the newest
// record need not carry: a renew of an older lease, a prune); whether its
// next value would pass its MAXVALUE (from the greater of its last value
// and those tokens, where the repair would put it); whether the
// next transaction id would map below the newest audit record (a move to
// another cluster: see leasestore_audit_new_era), lock_timeout and
// idle_in_transaction_session_timeout in milliseconds,
// session_replication_role, whether sessions are read-only by default,
// whether the server is a standby, the schema's name, migration version
// and oldest serving release (see schemaVersionSQL and schemaCompatSQL; a
// schema rolled back or moved on beneath a running service), those of
// the store's own triggers (own) that would not fire in a session whose
// session_replication_role is origin, as name=state (pg_trigger.tgenabled:
// D disabled, R replica only; - missing), NULL when all fire: the two that
// keep the trail append-only (migration 1), the one that marks what prunes
// removed (migration 7; checkSettings judges the version first, so a
// schema rolled back below it is named as such) and the prune window's
// guard (migration 8), and what a DBA did to the store's objects (store:
// its tables and sequence, found as the statements find them, through the
// search_path), as kind/object[/detail], NULL when nothing:
//
//	rls/T           row-level security applies to the session's role on T
//	                (row_security_active: enabled, and the role neither
//	                owns T, unless FORCE, nor has BYPASSRLS)
//	era/leasestore_audit_era  the session sees no row of it
//	window/leasestore_audit_prune/C  the prune window holds a committed
//	                row (a DBA's, by hand: a prune opens and closes it
//	                inside its own transactions, so no other session ever
//	                sees a prune's), for records before C (windowCutOffSQL)
//	unlogged/T/P    T's relpersistence P is not permanent (u: unlogged,
//	                t: a temporary table that stands in for the schema's)
//	trigger/T/N     a trigger N on T that is not the store's own and fires
//	                in an origin session (internal ones, a foreign key's,
//	                excluded), N quoted as an identifier
//	rule/T/N        a rule N on T that fires in an origin session
//	privilege/T/P   the session's role lacks P on T, which writes need
//	                (store.needs, each tested alone: has_table_privilege
//	                of several is true when any is held; the sequence's
//	                USAGE, UPDATE is one need, since nextval takes either;
//	                this statement reads leasestore_compat, goose's
//	                table and the prune window itself, and the other tables
//	                serve gc and prune, which name their GRANT when they
//	                lack it)
//	privilege/F/EXECUTE  the session's role may not execute the store's
//	                function F, which every change statement names (the
//	                server checks EXECUTE when a statement starts, whether
//	                it calls F or not); the other functions (a new era,
//	                the prune's, audit reads') name their GRANT when met
//
// pg_sequence, pg_class, pg_trigger, pg_rewrite and pg_proc are readable
// by every role.
//
// This statement, sweepSQL and repairSequenceSQL read the sequence's state
// with pg_sequence_last_value (NULL until its first nextval), which USAGE
// on the sequence allows; a SELECT from the sequence would need SELECT on
// it, which an application role often lacks. Only setval (fencing raise,
// the repair) needs UPDATE on it. A role with neither USAGE nor SELECT on
// it (one that only reads) is not refused by this statement: it reads the
// sequence's state only where the role may, and never finds it behind
// otherwise (Open accepts the role, whose reads serve; Health names the
// GRANT among the privileges the writes need).
const settingsSQL = `
WITH store AS MATERIALIZED (
    SELECT w.name, w.needs, c.oid, c.relkind, c.relpersistence
    FROM (VALUES ('leasestore_leases', '{SELECT,INSERT,UPDATE}'::text[]), ('leasestore_audit', '{SELECT,INSERT}'),
                 ('leasestore_audit_era', '{SELECT}'), ('leasestore_audit_prune', '{}'), ('leasestore_audit_pruned', '{}'),
                 ('leasestore_audit_prune_claim', '{}'), ('leasestore_compat', '{}'), ('leasestore_goose_db_version', '{}'),
                 ('leasestore_fencing_seq', '{"USAGE, UPDATE"}')) AS w(name, needs)
    JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(w.name)
), own (rel, name) AS (
    VALUES ('leasestore_audit', 'leasestore_audit_keep_pruned'), ('leasestore_audit', 'leasestore_audit_no_truncate'),
           ('leasestore_audit', 'leasestore_audit_no_update_delete'),
           ('leasestore_audit_prune', 'leasestore_audit_prune_window_guard')
)
SELECT current_setting('synchronous_commit'),
       s.seqcache, s.seqincrement, s.seqcycle, s.seqmin, s.seqmax,
       s.readable AND coalesce(t.token > coalesce(s.issued, 0), false),
       greatest(t.token, s.issued, 0)::numeric + s.seqincrement > s.seqmax,
       coalesce((SELECT max(a.id) FROM leasestore_audit a) >=
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint + (SELECT id_offset FROM leasestore_audit_era),
                false),
       (extract(epoch FROM current_setting('lock_timeout')::interval) * 1000)::bigint,
       (extract(epoch FROM current_setting('idle_in_transaction_session_timeout')::interval) * 1000)::bigint,
       current_setting('session_replication_role'),
       current_setting('default_transaction_read_only')::boolean,
       pg_is_in_recovery(),
       current_schema(),
       (SELECT coalesce(max(version_id), 0) FROM leasestore_goose_db_version),
       coalesce((SELECT oldest_serving_version FROM leasestore_compat WHERE id = 1), 0),
       (SELECT array_agg(own.name || '=' || coalesce(g.tgenabled::text, '-') ORDER BY own.name)
        FROM own
        LEFT JOIN pg_catalog.pg_trigger g ON g.tgrelid = pg_catalog.to_regclass(own.rel) AND g.tgname = own.name
        WHERE coalesce(g.tgenabled::text, '-') NOT IN ('O', 'A')),
       (SELECT array_agg(o.entry ORDER BY o.entry)
        FROM (SELECT 'rls/' || st.name FROM store st
              WHERE st.relkind IN ('r', 'p') AND pg_catalog.row_security_active(st.oid)
              UNION ALL
              SELECT 'era/leasestore_audit_era' WHERE NOT EXISTS (SELECT FROM leasestore_audit_era)
              UNION ALL
              SELECT 'window/leasestore_audit_prune/' || ` + windowCutOffSQL + ` FROM leasestore_audit_prune w
              UNION ALL
              SELECT 'unlogged/' || st.name || '/' || st.relpersistence::text FROM store st WHERE st.relpersistence <> 'p'
              UNION ALL
              SELECT 'trigger/' || st.name || '/' || quote_ident(g.tgname)
              FROM store st JOIN pg_catalog.pg_trigger g ON g.tgrelid = st.oid
              WHERE NOT g.tgisinternal AND g.tgenabled IN ('O', 'A')
                AND NOT EXISTS (SELECT FROM own WHERE own.rel = st.name AND own.name = g.tgname)
              UNION ALL
              SELECT 'rule/' || st.name || '/' || quote_ident(r.rulename)
              FROM store st JOIN pg_catalog.pg_rewrite r ON r.ev_class = st.oid
              WHERE r.rulename <> '_RETURN' AND r.ev_enabled IN ('O', 'A')
              UNION ALL
              SELECT 'privilege/' || st.name || '/' || split_part(n.priv, ',', 1)
              FROM store st, unnest(st.needs) AS n(priv)
              WHERE NOT CASE WHEN st.relkind = 'S' THEN pg_catalog.has_sequence_privilege(st.oid, n.priv)
                             ELSE pg_catalog.has_table_privilege(st.oid, n.priv) END
              UNION ALL
              SELECT 'privilege/' || f.name || '/EXECUTE'
              FROM (VALUES ('leasestore_outcome', 'leasestore_outcome(text, text, text)'),
                           ('leasestore_outcome_fresh', 'leasestore_outcome_fresh(text, text, text)'),
                           ('leasestore_audit_went_back', 'leasestore_audit_went_back()')) AS f(name, sig)
              JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(f.sig)
              WHERE NOT pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) AS o(entry))
FROM (SELECT p.seqcache, p.seqincrement, p.seqcycle, p.seqmin, p.seqmax, r.readable,
             CASE WHEN r.readable THEN pg_sequence_last_value('leasestore_fencing_seq') END AS issued
      FROM pg_catalog.pg_sequence p,
           LATERAL (SELECT pg_catalog.has_sequence_privilege(p.seqrelid, 'SELECT, USAGE') AS readable) AS r
      WHERE p.seqrelid = 'leasestore_fencing_seq'::regclass) AS s,
     (SELECT greatest((SELECT max(l.token) FROM leasestore_leases l),
                      (SELECT a.token FROM leasestore_audit a ORDER BY a.id DESC LIMIT 1)) AS token) AS t
`

// raiseTokensSQL returns the fencing sequence's cache, increment and
// whether it cycles and, when it caches no values and counts up without
// cycling, moves leasestore_fencing_seq @by past every token it issued
// or the store holds (the leases' rows, the newest audit record's; see
// repairSequenceSQL) and returns where it put it: see
// protocol.TokenRaiser. Any other sequence is left alone (the
// floor is NULL): sessions would go on handing out cached values below
// the floor, and one that counts down or cycles would come back below it.
// nextval, not the sequence's last value, is the base: a value
// an acquire draws between nextval and setval stays below the floor
// unless more than @by acquires drew one in that moment.
var raiseTokensSQL = compile(`
SELECT s.seqcache, s.seqincrement, s.seqcycle,
       CASE WHEN s.seqcache = 1 AND s.seqincrement > 0 AND NOT s.seqcycle THEN
           setval('leasestore_fencing_seq',
                  greatest(nextval('leasestore_fencing_seq'),
                           (SELECT max(token) FROM leasestore_leases),
                           (SELECT a.token FROM leasestore_audit a ORDER BY a.id DESC LIMIT 1)) + @by)
       END
FROM pg_catalog.pg_sequence s
WHERE s.seqrelid = 'leasestore_fencing_seq'::regclass`)

// raiseLockSQL starts fencing raise's transaction: SHARE ROW EXCLUSIVE on
// the trail, as leasestore_audit_new_era takes it, waits for every writer
// of a record in progress (each holds ROW EXCLUSIVE on it from before it
// reads the era's offset) and keeps new ones out until the raise commits,
// so no record is written with the old offset afterwards. LOCK in this
// mode needs UPDATE (or DELETE, TRUNCATE) on leasestore_audit.
const raiseLockSQL = `LOCK TABLE leasestore_audit IN SHARE ROW EXCLUSIVE MODE`

// raiseAuditIDsSQL moves the audit ids of fencing raise, under
// raiseLockSQL, when the fencing sequence caches no values, counts up and
// does not cycle, as raiseTokensSQL requires (a raise of any other
// sequence is refused and moves nothing): it sets the era's
// offset so that the next transaction id (the snapshot's xmax; later
// writers' ids are not below it) maps @by + 1 above the greatest id the
// trail holds or the era could have given so far (every transaction id
// below xmax, plus the offset). A restore to an earlier point (a
// point-in-time recovery, a base backup put back, an asynchronous standby
// promoted) takes the cluster's transaction ids back with the trail, and
// the ids of records written after that point, which followers may have
// read, would be given again above the restored trail's newest (where the
// era check, outcomeColumns, looks); after the raise every later id is
// above them, if the cluster assigned fewer than @by transaction ids
// since that point. The offset only grows. Needs SELECT and UPDATE on
// leasestore_audit_era. It returns whether the sequence is such (steady)
// and whether it moved the offset: a steady sequence and no offset moved
// means the session may update no row of the era (row-level security on
// it, or the row deleted), and RaiseTokens refuses before setval.
var raiseAuditIDsSQL = compile(`
WITH seq AS MATERIALIZED (
    SELECT s.seqcache = 1 AND s.seqincrement > 0 AND NOT s.seqcycle AS steady
    FROM pg_catalog.pg_sequence s WHERE s.seqrelid = 'leasestore_fencing_seq'::regclass
), moved AS (
    UPDATE leasestore_audit_era e
    SET id_offset = greatest(coalesce((SELECT max(a.id) FROM leasestore_audit a), 0), x.next - 1 + e.id_offset) + @by + 1 - x.next
    FROM (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next) AS x
    WHERE e.id = 1 AND (SELECT seq.steady FROM seq)
    RETURNING 1
)
SELECT coalesce((SELECT seq.steady FROM seq), false), EXISTS (SELECT FROM moved)`)

// repairSequenceSQL moves leasestore_fencing_seq past every token in
// leasestore_leases (tombstones keep each key's last token there) and past
// the newest audit record's. setval never moves it backwards here: it runs
// only when the sequence is below the greatest of those.
const repairSequenceSQL = `
SELECT setval('leasestore_fencing_seq', m.token)
FROM (SELECT greatest((SELECT max(token) FROM leasestore_leases),
                      (SELECT a.token FROM leasestore_audit a ORDER BY a.id DESC LIMIT 1)) AS token) AS m
WHERE m.token > coalesce(pg_sequence_last_value('leasestore_fencing_seq'), 0)`

// Pruning (see Backend.PruneAudit and the migration's prune window). Each
// batch is one transaction: open the window for records before @before,
// claim the request id for this run (pruneClaimSQL), delete the oldest
// @limit of them, close the window. pruneRecordSQL writes the prune's own
// record in the last batch's transaction, with an id made as the lease
// statements make theirs, after pruneUnclaimSQL freed the claim.
//
// pruneClaimSQL (migration 8) claims @request_id for the run @run unless
// the id's prune record is in the trail or another run holds it, and
// returns the run that holds it: @run when this one does, NULL when the
// record is there. pruneUnclaimSQL deletes the claim @run holds, in the
// last batch or in a transaction of its own (window open, nothing
// deleted) when the prune stops early.
//
// pruneOpenSQL opens the window unless a row of it is committed (a
// DBA's, by hand): it returns whether it did, and otherwise the committed
// row's cut-off (windowCutOffSQL; NULL when the row committed after the
// statement's snapshot). A prune's window, uncommitted, is the only other
// row it can meet: it waits for that prune's transaction, which deletes
// the row before it commits. A batch that did not open the window
// removes nothing (pruneWindowError); so the DBA's row stays, and no
// prune deletes it with its own window.
//
// pruneBatchSQL deletes only while leasestore_audit_keep_pruned (migration
// 7) fires in this session (ENABLE ALWAYS; ENABLE, the default, unless the
// session's session_replication_role is replica; ENABLE REPLICA only if it
// is; never after DISABLE TRIGGER), and returns whether it does: without
// it the batch would leave no mark, and a reader whose cursor lies before
// the removed records would skip them silently. Its catalog read sees the trigger as the DELETE will: the
// statement's snapshot is taken after its lock on the trail, which an
// ALTER TABLE of the trail's triggers waits for, and the other way round.
// It also fails (recordMissingSQL), removing nothing, when the session
// sees no row of leasestore_audit_era (row-level security on it, or the
// row deleted), which pruneRecordSQL makes the prune's record from: so a
// prune whose record could not be written removes nothing, in its first
// batch as in its last.
//
// pruneBatchSQL takes the oldest @limit records before @before whose id
// is greater than @after (the greatest id the prune's earlier batches
// took, 0 for the first, which it returns for the next: so the records it
// keeps are read once a prune, not again by every later batch) but those
// a retry of a change of a lease live at @now (the server's now() without
// a test clock) is answered from (leasestore_outcome reads the trail by
// request id): the record of the acquire that issued the live lease's
// token, and of its latest renew (no later renew of the token on the key,
// through leasestore_audit_key). Records of a lease that ended, by
// release, revoke or expiry, and a live lease's earlier renews, go. Its
// snapshot is the statement's: a lease that ends meanwhile keeps its
// records until the next prune (no lease it takes for ended is live again:
// a renew needs a live lease), and a change that commits meanwhile is not
// in it; nor, in a later batch, is a record kept by an earlier one, or
// committed meanwhile with an id below @after: the next prune takes them.
//
// pruneBatchSQL also returns how many records it took, beside how many
// it deleted: no other session deletes
// any meanwhile (a prune waits for the window of another), so the two
// differ only when something kept a record from its DELETE, a BEFORE
// DELETE trigger that returned NULL for it or a row-level security
// policy, and the batch then rolls back whole (keptRecordsError).
// pruneKeptSQL names what can have kept them: the BEFORE DELETE row
// triggers on the trail (tgtype: ROW 1, BEFORE 2, DELETE 8) that are not
// the store's own and fire in this session, and whether row-level
// security applies to the session's role on the trail.
//
// pruneRecordSQL fails (recordMissingSQL) when it wrote no record: the
// session sees no row of leasestore_audit_era, or a trigger dropped the
// record. The last batch then rolls back whole.
var (
	pruneOpenSQL = compile(`
WITH opened AS (
    INSERT INTO leasestore_audit_prune (id, before) VALUES (1, @before)
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT FROM opened), (SELECT ` + windowCutOffSQL + ` FROM leasestore_audit_prune w WHERE w.id = 1)`)

	pruneBatchSQL = compile(`
WITH mark AS MATERIALIZED (
    SELECT EXISTS (SELECT FROM pg_catalog.pg_trigger g
                   WHERE g.tgrelid = 'leasestore_audit'::regclass AND g.tgname = 'leasestore_audit_keep_pruned'
                     AND CASE current_setting('session_replication_role')
                             WHEN 'replica' THEN g.tgenabled IN ('A', 'R')
                             ELSE g.tgenabled IN ('A', 'O') END) AS fires,
           CASE WHEN EXISTS (SELECT FROM leasestore_audit_era) THEN true ELSE ` + recordMissingSQL + `::boolean END AS era
), taken AS MATERIALIZED (
    SELECT a.id FROM leasestore_audit a
    WHERE a.id > @after AND a.at < @before
      AND NOT EXISTS (SELECT FROM leasestore_leases l
                      WHERE l.namespace = a.namespace AND l.name = a.name AND l.token = a.token
                        AND l.expires_at > coalesce(@now::timestamptz, now()) AND l.ended_token IS DISTINCT FROM l.token
                        AND (a.op = 'acquire'
                             OR (a.op = 'renew'
                                 AND NOT EXISTS (SELECT FROM leasestore_audit r
                                                 WHERE r.name = a.name AND r.namespace = a.namespace AND r.id > a.id
                                                   AND r.op = 'renew' AND r.token = a.token))))
    ORDER BY a.id LIMIT @limit
), gone AS (
    DELETE FROM leasestore_audit
    WHERE id IN (SELECT taken.id FROM taken)
      AND (SELECT mark.era AND mark.fires FROM mark)
    RETURNING 1
)
SELECT (SELECT mark.fires FROM mark), (SELECT count(*) FROM taken), count(*),
       coalesce((SELECT max(taken.id) FROM taken), @after::bigint) FROM gone`)

	pruneKeptSQL = compile(`
SELECT coalesce((SELECT array_agg(quote_ident(g.tgname) ORDER BY g.tgname)
                 FROM pg_catalog.pg_trigger g
                 WHERE g.tgrelid = 'leasestore_audit'::regclass AND NOT g.tgisinternal
                   AND g.tgname <> 'leasestore_audit_no_update_delete'
                   AND g.tgtype & 11 = 11
                   AND CASE current_setting('session_replication_role')
                           WHEN 'replica' THEN g.tgenabled IN ('A', 'R')
                           ELSE g.tgenabled IN ('A', 'O') END), '{}'),
       pg_catalog.row_security_active('leasestore_audit'::regclass)`)

	pruneCloseSQL = compile(`DELETE FROM leasestore_audit_prune WHERE id = 1`)

	pruneClaimSQL = compile(`
SELECT leasestore_audit_prune_claim(@request_id, @run, @actor, @before, coalesce(@now::timestamptz, now()))`)

	pruneUnclaimSQL = compile(`SELECT leasestore_audit_prune_unclaim(@request_id, @run)`)

	pruneUsedSQL = compile(`
SELECT EXISTS (SELECT FROM leasestore_audit WHERE namespace = '' AND request_id = @request_id),
       coalesce(@now::timestamptz, now())`)

	pruneRecordSQL = compile(`
WITH rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash)
    SELECT CASE WHEN next.id > coalesce(next.top, 0) THEN next.id ELSE leasestore_audit_went_back() END,
           coalesce(@now::timestamptz, now()), 'prune', '', '', '', 0, @request_id, @actor, @reason, 'pruned',
           @record_version, ''
    FROM (SELECT pg_current_xact_id()::text::bigint + e.id_offset AS id,
                 (SELECT max(a.id) FROM leasestore_audit a) AS top
          FROM leasestore_audit_era e) AS next
    RETURNING id, at
)
SELECT coalesce((SELECT rec.id FROM rec), ` + recordMissingSQL + `::bigint), (SELECT rec.at FROM rec)`)
)

// sweepSQL removes up to @limit rows of leases that ended (expired, or
// tombstones: their expires_at is the time they ended), and whose lock-delay
// ended, more than @grace
// ago, and sets aside up to @limit rows of other ended leases; it returns
// how many rows it set aside and how many it removed. A row goes only
// while the fencing sequence has issued its token, caches no values, counts
// up and does not cycle (steady; a DBA's ALTER SEQUENCE of any of them is
// refused at Open and Health, see checkSettings), so
// that any later acquire of the key draws a greater one, and never the row
// holding the table's greatest token (top: read once, and only when a row
// is otherwise due to go, so a sweep with nothing to remove does not pay
// for it): so the table always holds a
// token at least as great as every token ever issued, and a switchover or
// a restore that did not carry the sequence is repaired from it
// (repairSequenceSQL), swept keys included; with that row gone too, the
// sequence was the only record of the tokens of swept keys
// (TestSequenceRepairCoversSweptKeys). Setting aside
// takes a row out of the live indexes (swept_token = token, see migration
// 3) and changes nothing any operation answers: the lease had already
// ended, and an acquire puts the row back by changing its token.
//
// One scan finds both kinds (cand), and stops once it has 2 * @limit
// rows: a statement that found nothing to do reads the table once, and a
// mass expiry is removed in steps that each read only as far as their
// rows. Rows another sweeper or a writer holds are skipped; the row lock
// re-checks that a row is still ended (and recomputes gone) when an
// acquire took it meanwhile. A row goes only with its key's writer lock
// (tried in dead, never waited for; a row whose key is taken stays for a
// later sweep), so a writer that holds the lock never waits for a removal
// after it read its time (see lockCTE): an acquire that read its time
// before the removal of a row whose lease was still live then would start
// its lease before that one ended (TestChangeTimesFollowLockWaits). Setting
// a row aside changes no lease and takes no such lock. A key whose row is
// gone has no lease and no last token to keep, and its trail is untouched.
var sweepSQL = compile(`
WITH seq AS MATERIALIZED (
    SELECT coalesce(pg_sequence_last_value('leasestore_fencing_seq'), 0) AS issued,
           coalesce((SELECT seqcache = 1 AND seqincrement > 0 AND NOT seqcycle
                     FROM pg_catalog.pg_sequence WHERE seqrelid = 'leasestore_fencing_seq'::regclass), false) AS steady
), top AS MATERIALIZED (
    SELECT max(t.token) AS token FROM leasestore_leases t
), cand AS MATERIALIZED (
    SELECT l.namespace, l.name,
           (l.expires_at + l.lock_delay < coalesce(@now::timestamptz, now()) - @grace::interval
            AND l.token <= seq.issued AND seq.steady
            AND l.token < (SELECT top.token FROM top)) AS gone
    FROM leasestore_leases l, seq
    WHERE l.expires_at <= coalesce(@now::timestamptz, now())
      AND ((l.expires_at + l.lock_delay < coalesce(@now::timestamptz, now()) - @grace::interval
            AND l.token <= seq.issued AND seq.steady
            AND l.token < (SELECT top.token FROM top))
           OR l.swept_token IS DISTINCT FROM l.token)
    LIMIT 2 * @limit::integer
    FOR UPDATE OF l SKIP LOCKED
), dead AS (
    SELECT cand.namespace, cand.name FROM cand
    WHERE cand.gone AND pg_try_advisory_xact_lock(1818583411, hashtext(cand.namespace || '/' || cand.name))
    LIMIT @limit
), ended AS (
    SELECT cand.namespace, cand.name FROM cand WHERE NOT cand.gone LIMIT @limit
), gone AS (
    DELETE FROM leasestore_leases l USING dead
    WHERE l.namespace = dead.namespace AND l.name = dead.name
    RETURNING 1
), aside AS (
    UPDATE leasestore_leases l SET swept_token = l.token
    FROM ended
    WHERE l.namespace = ended.namespace AND l.name = ended.name
    RETURNING 1
)
SELECT (SELECT count(*) FROM aside), (SELECT count(*) FROM gone)`)

// Coalescing (see coalesce.go). changeBatchFnSQL creates, in the
// connection's temporary schema (so no migration, and every release keeps
// its own), the function that applies a batch of operations in one
// statement, one commit. It does not wait for a key: it tries every key's
// advisory lock, and runs its operations under a lock_timeout of 1 ms
// (the setting is restored before the commit); an operation whose key it could not take
// (another writer's advisory lock, or a sweeper's or any session's lock on
// the key's row, or an insert of the key or of its request id in
// progress) comes back busy (SQLSTATE LS002) and runs alone, under its
// caller's deadline, so a stuck key holds up no other key's operation. Then it runs each operation in
// turn, in the order given, each in a subtransaction of its own (a plpgsql
// block with an exception handler): an error rolls back that operation
// alone and comes back in its row (err_state, err_message,
// err_constraint); the others go on, save the later operations of its
// key, which come back busy without running: an operation that failed may
// run again alone (busy, a concurrent request with its request id), and
// its key's later ones must not commit before it (RenewMany runs them
// after it, in order: TestRenewManyKeepsTheOrderOfOneKeysRenewals). Each operation runs the statement of
// its kind above (its change and its audit record in one statement, see
// batchRecordCTE; a change that came back without its record fails,
// recordMissingSQL), minus the lock (held already), a release or revoke
// waking the key's waiters as those do; it sees the changes of
// the operations before it, so operations on one key behave as if run one
// after the other in that order. Each operation's time is the server's
// clock_timestamp() as it starts, after the batch holds its key, as
// lockCTE reads it (TestChangeTimesFollowLockWaits/coalesced). Each
// operation's statement, and its leasestore_outcome, take their snapshots
// then too (the function is VOLATILE: each of its queries takes a snapshot
// of its own), so they show every change of the key committed before the
// batch held it: no operation of a batch meets a change of its lease that
// its snapshot missed, and none needs leasestore_outcome_fresh.
//
// Audit ids. Each change's subtransaction gets a transaction id of its
// own when it writes, greater than the batch's top-level one; a record's
// id is that id (read back as the changed row's xmin, widened to 64 bits
// from the top-level id) plus the era's offset. The top-level id is taken
// after the locks and the era check's snapshot, so every id of the batch
// is greater than every record that snapshot sees (the era check, once per
// batch, and only until a batch on the server connection passed it: see
// outcomeColumns), each key's records are in the order of its changes, and a
// follower's horizon (the oldest top-level transaction in progress) stays
// below every record of a batch until it commits. ROW EXCLUSIVE on the
// trail, taken before the era's offset is read, keeps a new era
// (leasestore_audit_new_era) out until the batch commits.
//
// One row per operation, in order, with outcomeColumns and the error.
var changeBatchFnSQL = `
CREATE FUNCTION pg_temp.leasestore_change_batch(
    p_op text[], p_ns text[], p_name text[], p_owner text[], p_token bigint[], p_ttl interval[],
    p_request_id text[], p_params_hash text[], p_actor text[], p_reason text[],
    p_now timestamptz, p_lease_version integer, p_record_version integer, p_lock_delay interval[])
RETURNS TABLE (o_now timestamptz, o_owner text, o_token bigint, o_acquired_at timestamptz, o_renewed_at timestamptz,
               o_expires_at timestamptz, o_version integer, o_lock_delay interval, o_fresh bigint, o_outcome json,
               o_err_state text, o_err_message text, o_err_constraint text)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_now   timestamptz;
    v_top   bigint;
    v_off   bigint;
    v_mark  text;
    v_check boolean;
    v_xid   bigint;
    v_sub   xid;
    v_rec   boolean;
    v_op    text;
    v_ns    text;
    v_name  text;
    v_owner text;
    v_token bigint;
    v_ttl   interval;
    v_delay interval;
    v_rid   text;
    v_busy  bigint[];
    v_failed bigint[] := '{}';
    v_lock_timeout text;
BEGIN
    SELECT coalesce(array_agg(u.i), '{}') INTO v_busy
    FROM unnest(p_ns, p_name) WITH ORDINALITY AS u(ns, name, i)
    WHERE NOT pg_try_advisory_xact_lock(1818583411, hashtext(u.ns || '/' || u.name));
    LOCK TABLE leasestore_audit IN ROW EXCLUSIVE MODE;
    v_lock_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', '1ms', true);
    SELECT e.id_offset, e.tableoid || '/' || e.id_offset INTO v_off, v_mark FROM leasestore_audit_era e;
    v_check := current_setting('leasestore.audit_ids_checked', true) IS DISTINCT FROM v_mark;
    IF v_check THEN
        SELECT max(a.id) INTO v_top FROM leasestore_audit a;
    END IF;
    v_xid := pg_current_xact_id()::text::bigint;
    IF v_check AND v_xid + v_off > coalesce(v_top, 0) THEN
        PERFORM set_config('leasestore.audit_ids_checked', v_mark, false);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_op, 1), 0) LOOP
        v_op := p_op[i]; v_ns := p_ns[i]; v_name := p_name[i]; v_owner := p_owner[i];
        v_token := p_token[i]; v_ttl := p_ttl[i]; v_rid := p_request_id[i]; v_delay := p_lock_delay[i];
        -- The member's time: after its key's lock (taken above), as lockCTE
        -- reads it; now() is the batch's start, before the locks. Its row's
        -- lock is waited for under lock_timeout (1 ms): a longer wait makes
        -- the member run alone, through lockCTE.
        v_now := coalesce(p_now, clock_timestamp());
        o_now := v_now; o_owner := NULL; o_token := NULL; o_acquired_at := NULL; o_renewed_at := NULL;
        o_expires_at := NULL; o_version := NULL; o_lock_delay := NULL; o_fresh := NULL; o_outcome := NULL;
        o_err_state := NULL; o_err_message := NULL; o_err_constraint := NULL; v_sub := NULL; v_rec := NULL;
        IF i = ANY (v_busy) THEN
            o_err_state := 'LS002'; o_err_message := 'the key is locked by another transaction';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF cardinality(v_failed) > 0
           AND EXISTS (SELECT FROM unnest(v_failed) AS f(j) WHERE p_ns[f.j] = v_ns AND p_name[f.j] = v_name) THEN
            -- An earlier operation of the key failed: this one follows it.
            o_err_state := 'LS002'; o_err_message := 'an earlier operation of the key in the batch failed';
            RETURN NEXT;
            CONTINUE;
        END IF;
        BEGIN
            IF v_op = 'acquire' THEN
                WITH prev AS (
                    SELECT l.token, l.expires_at, l.version, l.ended_token, ` + delayEnds("l") + ` AS delay_ends
                    FROM leasestore_leases l WHERE l.namespace = v_ns AND l.name = v_name
                ), fresh AS (
                    SELECT greatest(nextval('leasestore_fencing_seq'), ` + keyFloorSQL + ` + 1) AS token
                    WHERE NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = v_ns AND a.request_id = v_rid)
                      AND NOT EXISTS (SELECT FROM prev
                                      WHERE (prev.ended_token IS DISTINCT FROM prev.token AND prev.expires_at > v_now)
                                         OR prev.delay_ends > v_now
                                         OR prev.version <> p_lease_version)
                ), after AS (
                    INSERT INTO leasestore_leases AS l (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version,
                                                        lock_delay, delay_token)
                    SELECT v_ns, v_name, v_owner, fresh.token, v_now, v_now, v_now + v_ttl, p_lease_version,
                           v_delay, CASE WHEN v_delay > interval '0' THEN fresh.token END
                    FROM fresh
                    ON CONFLICT (namespace, name) DO UPDATE SET
                        owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
                        renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
                        ended_token = NULL, ended_expiry = NULL, lock_delay = excluded.lock_delay, delay_token = excluded.delay_token
                    WHERE l.version = p_lease_version AND l.token < excluded.token
                      AND CASE WHEN (` + delayEnds("l") + `) IS NULL THEN l.ended_token = l.token OR l.expires_at <= excluded.acquired_at
                               ELSE (` + delayEnds("l") + `) <= excluded.acquired_at END
                    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version,
                              ` + leaseDelay("l") + ` AS lock_delay, l.xmin
                ), ` + batchRecordCTE("after.acquired_at", "'acquired'") + `
                SELECT after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
                       after.lock_delay, fresh.token, after.xmin, EXISTS (SELECT FROM rec)
                INTO o_owner, o_token, o_acquired_at, o_renewed_at, o_expires_at, o_version, o_lock_delay, o_fresh, v_sub, v_rec
                FROM (SELECT) AS one LEFT JOIN after ON true LEFT JOIN fresh ON true;
            ELSIF v_op = 'renew' THEN
                WITH after AS (
                    UPDATE leasestore_leases l
                    SET renewed_at = v_now, swept_token = NULL,
                        expires_at = ` + keptExpiry("v_now", "v_ttl") + `
                    WHERE l.namespace = v_ns AND l.name = v_name AND (l.owner = v_owner) IS TRUE AND l.token = v_token
                      AND l.expires_at > v_now AND l.ended_token IS DISTINCT FROM l.token
                      AND l.version = p_lease_version
                      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = v_ns AND a.request_id = v_rid)
                    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, l.version,
                              ` + leaseDelay("l") + ` AS lock_delay, l.xmin
                ), ` + batchRecordCTE("after.renewed_at", "'renewed'") + `
                SELECT after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
                       after.lock_delay, after.xmin, EXISTS (SELECT FROM rec)
                INTO o_owner, o_token, o_acquired_at, o_renewed_at, o_expires_at, o_version, o_lock_delay, v_sub, v_rec
                FROM after;
            ELSIF v_op = 'release' OR v_op = 'revoke' THEN
                WITH after AS (
                    UPDATE leasestore_leases l
                    SET ended_token = l.token, ended_expiry = l.expires_at, expires_at = v_now,
                        delay_token = CASE WHEN v_op = 'revoke' AND l.delay_token = l.token THEN -l.token ELSE l.delay_token END
                    WHERE l.namespace = v_ns AND l.name = v_name
                      AND CASE WHEN v_op = 'release' THEN (l.owner = v_owner) IS TRUE AND l.token = v_token
                               ELSE v_token = 0 OR l.token = v_token END
                      AND l.expires_at > v_now AND l.ended_token IS DISTINCT FROM l.token
                      AND l.version = p_lease_version
                      AND NOT EXISTS (SELECT FROM leasestore_audit a WHERE a.namespace = v_ns AND a.request_id = v_rid)
                    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.ended_expiry AS expires_at, l.version,
                              ` + leaseDelay("l") + ` AS lock_delay, l.xmin
                ), ` + batchRecordCTE("v_now", "CASE v_op WHEN 'release' THEN 'released' ELSE 'revoked' END") + `
                SELECT after.owner, after.token, after.acquired_at, after.renewed_at, after.expires_at, after.version,
                       after.lock_delay, after.xmin, EXISTS (SELECT FROM rec)
                INTO o_owner, o_token, o_acquired_at, o_renewed_at, o_expires_at, o_version, o_lock_delay, v_sub, v_rec
                FROM after;
            ELSE
                RAISE EXCEPTION 'leasestore_change_batch: unknown operation %', v_op USING ERRCODE = '22023';
            END IF;
            IF v_sub IS NOT NULL AND NOT v_rec THEN
                -- The change came back without its audit record: it fails
                -- (rolled back alone) as a statement alone does.
                PERFORM ` + recordMissingSQL + `;
            END IF;
            IF v_sub IS NULL THEN
                o_outcome := leasestore_outcome(v_ns, v_name, v_rid);
            ELSE
                -- Wakes waiters of the key, only when one is registered: see notify.go.
                IF v_op IN ('release', 'revoke')
                   AND NOT pg_try_advisory_xact_lock(1818583412, hashtext(v_ns || '/' || v_name) & ` + waitLockMask + `) THEN
                    PERFORM pg_notify('leasestore_wake', json_build_array(current_schema(), v_ns, v_name)::text);
                END IF;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS o_err_state = RETURNED_SQLSTATE, o_err_message = MESSAGE_TEXT,
                                    o_err_constraint = CONSTRAINT_NAME;
            IF o_err_state = '55P03' THEN
                o_err_state := 'LS002'; -- lock_timeout: another transaction holds the key's row
            END IF;
            v_failed := v_failed || i::bigint;
            o_owner := NULL; o_token := NULL; o_acquired_at := NULL; o_renewed_at := NULL;
            o_expires_at := NULL; o_version := NULL; o_lock_delay := NULL; o_fresh := NULL; o_outcome := NULL;
        END;
        RETURN NEXT;
    END LOOP;
    -- The commit (a NOTIFY's lock) waits as any other transaction's does.
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
END
$fn$`

// batchRecordCTE is the CTE rec of a member's statement in
// changeBatchFnSQL: the audit record of the change its CTE after returned
// (none when it returned no row), written at the SQL expression at with
// the status expression status, in the same statement as the change (one
// statement per member: a statement of its own for the record cost the
// batch function about a sixth more time per member, though little of a
// whole round trip's server CPU: CHANGELOG). Its id is the change's
// subtransaction id, after.xmin, widened to 64 bits from the batch's
// top-level id v_xid, plus the era's offset v_off; v_top is the newest
// record when the batch checked the era (NULL when the connection had
// checked it already). It returns the record's id, and writes nothing when
// the batch saw no row of leasestore_audit_era (v_off NULL), as recordCTE
// does; the member then fails (recordMissingSQL).
func batchRecordCTE(at, status string) string {
	return `rec AS (
                    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                                  status, version, params_hash, expires_at, acquired_at, renewed_at, lock_delay)
                    SELECT CASE WHEN x.id > coalesce(v_top, 0) THEN x.id ELSE leasestore_audit_went_back() END,
                           ` + at + `, v_op, v_ns, v_name, after.owner, after.token, v_rid, p_actor[i], p_reason[i],
                           ` + status + `, p_record_version, p_params_hash[i], after.expires_at, after.acquired_at,
                           after.renewed_at, nullif(after.lock_delay, interval '0')
                    FROM after
                    CROSS JOIN LATERAL (SELECT v_xid + ((after.xmin::text::bigint - v_xid % 4294967296 + 4294967296) % 4294967296)
                                               + v_off AS id WHERE v_off IS NOT NULL) AS x
                    RETURNING id
                )`
}

// changeBatchSQL applies a batch through changeBatchFnSQL's function; the
// arrays hold one element per operation, in order.
var changeBatchSQL = compile(`
SELECT * FROM pg_temp.leasestore_change_batch(@ops, @nss, @names, @owners, @tokens, @ttls, @request_ids,
    @params_hashes, @actors, @reasons, @now, @lease_version, @record_version, @lock_delays)`)
