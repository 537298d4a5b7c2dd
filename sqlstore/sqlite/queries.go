package sqlite

// Every statement of the SQLite backend, in one place. Parameters are
// numbered (?1, ?2, ...) so a value used twice is bound once. Times are
// INTEGER microseconds since the Unix epoch; "now" is always a parameter,
// read from the backend's clock inside the transaction, never SQLite's own
// clock, so an injected test clock governs expiry everywhere.
//
// State changes run inside one BEGIN IMMEDIATE transaction, in this order:
// the conditional statement (qAcquire, qRenew, qRelease or qRevoke), which
// also requires the request id to be new (NOT EXISTS in the audit
// trail, through the index qFindRequest uses), for acquire the
// fencing counter bump (qBumpFencing), and the audit insert (qInsertAudit).
// When the conditional statement matches no row, the idempotency look-up
// (qFindRequest) answers a used request id, else qCurrentLease reads the
// row that made it fail, so the outcome is classified by
// backendkit.CheckAcquire, CheckHolder or CheckRevoke, and the
// transaction is rolled back. (Testing the request id inside the
// conditional statement spares a write that takes effect a statement of
// its own: the look-up runs only when nothing was written.)
// leaseDelay is the select-list expression of a row's lock-delay (µs): its
// lock_delay while delay_token is its token (see migration 4), else 0.
const leaseDelay = `CASE WHEN delay_token = token THEN lock_delay ELSE 0 END`

const (
	// qSchemaTable tells whether goose's version table exists: ?1 its name.
	qSchemaTable = `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1`

	// qTables lists the file's tables but SQLite's own (sqlite_sequence,
	// sqlite_stat1, ...), by name.
	qTables = `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`

	// qSchemaVersion reads the applied migration version, as goose does.
	// The table name is a constant of the migrations package, not input.
	qSchemaVersion = `SELECT coalesce(max(version_id), 0) FROM leasestore_goose_db_version`

	// qSchemaCompat reads the oldest release schema version that can serve
	// this (newer) schema; see migrations/sqlite/00002.
	qSchemaCompat = `SELECT oldest_serving_version FROM leasestore_compat WHERE id = 1`

	// qStoreGuards reads, in one statement, the schema's version (as
	// qSchemaVersion), the cut-off of a committed prune window (a row of
	// leasestore_audit_prune, which a prune opens and closes inside each
	// of its transactions; NULL when there is none) and the name and text
	// of every trigger of the file, with its table (NULLs when it has
	// none): see Backend.storeRefusal.
	qStoreGuards = `
SELECT v.version, v.prune_before, t.name, t.sql, t.tbl_name
FROM (SELECT (SELECT coalesce(max(version_id), 0) FROM leasestore_goose_db_version) AS version,
             (SELECT before FROM leasestore_audit_prune WHERE id = 1) AS prune_before) AS v
LEFT JOIN sqlite_schema AS t ON t.type = 'trigger'`

	// qJournalMode reads a connection's journal mode: "wal" for one that
	// keeps the WAL index in the file's -shm (locking_mode normal), or that
	// of an immutable handle, which reads the file alone.
	qJournalMode = `PRAGMA journal_mode`

	// qJournalModeWAL switches the file to WAL (persistent) and returns the
	// journal mode in effect.
	qJournalModeWAL = `PRAGMA journal_mode = WAL`

	// qBusyTimeout reads a connection's busy timeout (ms); Health's write
	// probe sets it to 0 for the probe and back.
	qBusyTimeout = `PRAGMA busy_timeout`

	// qWriteProbe is a write that matches no row: it begins a write
	// transaction, which a handle that cannot write refuses with
	// SQLITE_READONLY before trying any lock, and commits no page.
	qWriteProbe = `UPDATE leasestore_fencing SET last_token = last_token WHERE 0`

	// qDatabaseFile names the file behind a borrowed *sql.DB, for messages.
	qDatabaseFile = `SELECT file FROM pragma_database_list WHERE name = 'main'`

	// qSynchronous reads a connection's synchronous level: 0 OFF, 1 NORMAL,
	// 2 FULL, 3 EXTRA.
	qSynchronous = `PRAGMA synchronous`

	// qFindRequest is the idempotency look-up: ?1 namespace, ?2 request id.
	qFindRequest = `
SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
       params_hash, expires_at, acquired_at, renewed_at, lock_delay
FROM leasestore_audit
WHERE namespace = ?1 AND request_id = ?2`

	// qAcquire inserts a lease or takes over an expired one, with the next
	// fencing token: ?1 namespace, ?2 name, ?3 owner, ?4 now, ?5 expires_at,
	// ?6 the lease format version, ?7 the lock-delay (µs), ?8 the request
	// id. It returns the token, or no row when the request id was used, or
	// a live lease, the lock-delay of an expired one or of a revoked one
	// (leasestore_lock_delays), or a row of another format version is in
	// the way. (The WHERE of the SELECT also lifts
	// the parsing ambiguity of an upsert from a SELECT.)
	qAcquire = `
INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version,
                               lock_delay, delay_token)
SELECT ?1, ?2, ?3, f.last_token + 1, ?4, ?4, ?5, ?6, ?7, f.last_token + 1
FROM leasestore_fencing f
WHERE f.id = 1
  AND NOT EXISTS (SELECT 1 FROM leasestore_lock_delays d
                  WHERE d.namespace = ?1 AND d.name = ?2 AND d.ended_at + d.lock_delay > ?4)
  AND NOT EXISTS (SELECT 1 FROM leasestore_audit a WHERE a.namespace = ?1 AND a.request_id = ?8)
ON CONFLICT (namespace, name) DO UPDATE SET
    owner       = excluded.owner,
    token       = excluded.token,
    acquired_at = excluded.acquired_at,
    renewed_at  = excluded.renewed_at,
    expires_at  = excluded.expires_at,
    version     = excluded.version,
    lock_delay  = excluded.lock_delay,
    delay_token = excluded.delay_token
WHERE leasestore_leases.expires_at
      + CASE WHEN leasestore_leases.delay_token = leasestore_leases.token THEN leasestore_leases.lock_delay ELSE 0 END <= ?4
  AND leasestore_leases.version = ?6
RETURNING token`

	// qBumpFencing records that the token qAcquire took was issued.
	qBumpFencing = `UPDATE leasestore_fencing SET last_token = last_token + 1 WHERE id = 1 RETURNING last_token`

	// qRaiseTokens moves the fencing counter ?1 past the greatest token
	// counted or held (the counter holds every token it issued; the
	// leases' are read too, in case a row was written another way) and
	// returns it: see protocol.TokenRaiser.
	qRaiseTokens = `UPDATE leasestore_fencing
SET last_token = max(last_token, coalesce((SELECT max(token) FROM leasestore_leases), 0)) + ?1
WHERE id = 1 RETURNING last_token`

	// qIssuedAbove reads the greatest token the file holds above the
	// fencing counter (NULL when the counter is at or above every one):
	// the leases' (a key's row keeps its last token after release and
	// expiry until the sweep removes it; a scan of the keys' rows, no
	// larger than a list of them), the lock-delays' (a revoked key's, in
	// force only, so few) and those of the newest audit records (by id,
	// the trail's primary key: a bounded read however long the trail).
	// While the counter has issued nothing since it was lowered, the
	// newest acquire's record holds the greatest token issued, that of a
	// key whose row the sweep removed too. See Backend.repairCounter.
	qIssuedAbove = `
SELECT nullif(max(
    coalesce((SELECT max(token) FROM leasestore_leases), 0),
    coalesce((SELECT max(token) FROM leasestore_lock_delays), 0),
    coalesce((SELECT max(token) FROM (SELECT token FROM leasestore_audit ORDER BY id DESC LIMIT 1000)), 0),
    f.last_token), f.last_token)
FROM leasestore_fencing f WHERE f.id = 1`

	// qRepairCounter moves the fencing counter up to ?1, the greatest
	// token issued that qIssuedAbove found above it (never down: the
	// trigger leasestore_fencing_no_decrease refuses that, and the WHERE
	// leaves a counter that moved past ?1 meanwhile as it is).
	qRepairCounter = `UPDATE leasestore_fencing SET last_token = ?1 WHERE id = 1 AND last_token < ?1`

	// qRaiseAuditIDs moves the audit trail's id counter (AUTOINCREMENT's
	// row of sqlite_sequence, which a copy of the file put back carries
	// back with it) ?1 past the greatest id counted or held, in the
	// transaction of qRaiseTokens: every later record's id is greater
	// than any given since the copy, if fewer than ?1 were, so a follower
	// whose cursor lies among them does not skip the new records. The row
	// is missing until the first record is written: qSeedAuditIDs adds it.
	qSeedAuditIDs = `INSERT INTO sqlite_sequence (name, seq)
SELECT 'leasestore_audit', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'leasestore_audit')`
	qRaiseAuditIDs = `UPDATE sqlite_sequence
SET seq = max(seq, coalesce((SELECT max(id) FROM leasestore_audit), 0)) + ?1
WHERE name = 'leasestore_audit'`

	// qRenew extends the live lease (?1 namespace, ?2 name, ?3 owner,
	// ?4 token) from ?5 now by ?6 the TTL (µs; 0 keeps the lease's own,
	// expires_at - renewed_at); ?7 the lease format version, ?8 the
	// request id (new). It returns the lease's acquired_at, expires_at and
	// lock-delay, and whether the row is set aside (swept_token = token,
	// see migration 3): a process whose clock lags another's may renew a
	// lease the other's sweeper already set aside, and the renewed lease
	// must be back in the live indexes, which qPutBack then does. qRenew
	// does not assign swept_token itself: SQLite rewrites the entries of
	// every partial index whose WHERE reads a column an UPDATE assigns,
	// changed or not, so each renew would write a page of both live
	// indexes more (each page a frame of the log, written and synced).
	qRenew = `
UPDATE leasestore_leases
SET renewed_at = ?5, expires_at = ?5 + CASE WHEN ?6 = 0 THEN expires_at - renewed_at ELSE ?6 END
WHERE namespace = ?1 AND name = ?2 AND owner = ?3 AND token = ?4 AND expires_at > ?5 AND version = ?7
  AND NOT EXISTS (SELECT 1 FROM leasestore_audit a WHERE a.namespace = ?1 AND a.request_id = ?8)
RETURNING acquired_at, expires_at, ` + leaseDelay + `, swept_token IS token`

	// qPutBack puts the row at (?1 namespace, ?2 name), which qRenew
	// renewed while it was set aside, back in the live indexes.
	qPutBack = `UPDATE leasestore_leases SET swept_token = NULL WHERE namespace = ?1 AND name = ?2`

	// qRelease deletes the live lease (?1 namespace, ?2 name, ?3 owner,
	// ?4 token) at ?5 now; ?6 the lease format version, ?7 the request id
	// (new).
	qRelease = `
DELETE FROM leasestore_leases
WHERE namespace = ?1 AND name = ?2 AND owner = ?3 AND token = ?4 AND expires_at > ?5 AND version = ?6
  AND NOT EXISTS (SELECT 1 FROM leasestore_audit a WHERE a.namespace = ?1 AND a.request_id = ?7)
RETURNING acquired_at, renewed_at, expires_at, ` + leaseDelay

	// qRevoke deletes the live lease at (?1 namespace, ?2 name) whoever holds
	// it, only with token ?3 unless ?3 is 0, at ?4 now; ?5 the lease format
	// version, ?6 the request id (new).
	qRevoke = `
DELETE FROM leasestore_leases
WHERE namespace = ?1 AND name = ?2 AND (?3 = 0 OR token = ?3) AND expires_at > ?4 AND version = ?5
  AND NOT EXISTS (SELECT 1 FROM leasestore_audit a WHERE a.namespace = ?1 AND a.request_id = ?6)
RETURNING owner, token, acquired_at, renewed_at, expires_at, ` + leaseDelay

	// qKeepDelay records the lease a revoke ended, whose lock-delay keeps
	// the key: ?1 namespace, ?2 name, ?3 owner, ?4 token, ?5 acquired_at,
	// ?6 renewed_at, ?7 ended_at (the revoke's now), ?8 the lock-delay.
	qKeepDelay = `
INSERT INTO leasestore_lock_delays (namespace, name, owner, token, acquired_at, renewed_at, ended_at, lock_delay)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (namespace, name) DO UPDATE SET
    owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
    renewed_at = excluded.renewed_at, ended_at = excluded.ended_at, lock_delay = excluded.lock_delay`

	// qCurrentDelay reads the revoked lease whose lock-delay keeps (?1
	// namespace, ?2 name) at ?3 now; no row when none does.
	qCurrentDelay = `
SELECT owner, token, acquired_at, renewed_at, ended_at, lock_delay
FROM leasestore_lock_delays
WHERE namespace = ?1 AND name = ?2 AND ended_at + lock_delay > ?3`

	// qCurrentLease reads the row at (?1 namespace, ?2 name), expired or not,
	// to classify a conditional statement that matched nothing.
	qCurrentLease = `
SELECT owner, token, acquired_at, renewed_at, expires_at, version, ` + leaseDelay + `
FROM leasestore_leases
WHERE namespace = ?1 AND name = ?2`

	// qGetLease reads, for get, the row at (?1 namespace, ?2 name), expired
	// or not (first column 0), and the revoked lease whose lock-delay keeps
	// the key at ?3 now (1; its ended_at as expires_at, no version column):
	// one statement, so both come from one snapshot, which two reads
	// without the write lock would not give.
	qGetLease = `
SELECT 0, owner, token, acquired_at, renewed_at, expires_at, version, ` + leaseDelay + `
FROM leasestore_leases
WHERE namespace = ?1 AND name = ?2
UNION ALL
SELECT 1, owner, token, acquired_at, renewed_at, ended_at, 0, lock_delay
FROM leasestore_lock_delays
WHERE namespace = ?1 AND name = ?2 AND ended_at + lock_delay > ?3`

	// qInsertAudit appends one audit record; ?13 expires_at, ?14
	// acquired_at, ?15 renewed_at and ?16 lock_delay (µs, NULL for none)
	// are the lease's as the operation answered it.
	qInsertAudit = `
INSERT INTO leasestore_audit
    (at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash, expires_at,
     acquired_at, renewed_at, lock_delay)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)`

	// qList pages through the live leases of namespace ?1 by name, after
	// the cursor's name ?2 ("" for the first page), within the prefix range
	// [?3, ?4) (see prefixUpperBound), live at ?5; ?6 is the page size plus
	// one. It reads the live index (rows the sweeper has not set aside, see
	// migration 3), whose predicate its WHERE repeats word for word, as
	// SQLite needs to use a partial index; INDEXED BY holds the planner to
	// it: without statistics SQLite prefers the primary key, which holds
	// the set-aside rows too. Beside them it reads the set-aside rows that
	// are live at ?5 (a sweeper on a faster clock set them aside, see
	// migration 12): the end of the set-aside index, the rows that expire
	// after ?5, few however many expired rows wait for removal. SQLite
	// merges the two in name order, reading the live index only as far as
	// the page needs and sorting only those set-aside rows
	// (TestListsDoNotReadSetAsideRows holds the plan).
	qList = `
SELECT name, owner, token, acquired_at, renewed_at, expires_at, version, ` + leaseDelay + `
FROM leasestore_leases INDEXED BY leasestore_leases_live
WHERE namespace = ?1 AND name > ?2 AND name >= ?3 AND name < ?4
  AND swept_token IS NOT token
  AND expires_at > ?5
UNION ALL
SELECT name, owner, token, acquired_at, renewed_at, expires_at, version, ` + leaseDelay + `
FROM leasestore_leases INDEXED BY leasestore_leases_set_aside
WHERE namespace = ?1 AND expires_at > ?5
  AND swept_token IS token
  AND name > ?2 AND name >= ?3 AND name < ?4
ORDER BY name
LIMIT ?6`

	// qListOwner is qList for owner ?7, through the live owner index
	// and the set-aside index.
	qListOwner = `
SELECT name, owner, token, acquired_at, renewed_at, expires_at, version, ` + leaseDelay + `
FROM leasestore_leases INDEXED BY leasestore_leases_owner_live
WHERE namespace = ?1 AND owner = ?7 AND name > ?2 AND name >= ?3 AND name < ?4
  AND swept_token IS NOT token
  AND expires_at > ?5
UNION ALL
SELECT name, owner, token, acquired_at, renewed_at, expires_at, version, ` + leaseDelay + `
FROM leasestore_leases INDEXED BY leasestore_leases_set_aside
WHERE namespace = ?1 AND expires_at > ?5
  AND swept_token IS token
  AND owner = ?7 AND name > ?2 AND name >= ?3 AND name < ?4
ORDER BY name
LIMIT ?6`

	// qNamespaces returns up to ?3 namespaces after ?1 that hold a lease
	// live at ?2, in byte order: a skip scan of the live index, one probe
	// per namespace.
	qNamespaces = `
WITH RECURSIVE ns(namespace) AS (
    SELECT (SELECT namespace FROM leasestore_leases INDEXED BY leasestore_leases_live
            WHERE namespace > ?1 AND swept_token IS NOT token AND expires_at > ?2
            ORDER BY namespace LIMIT 1)
    UNION ALL
    SELECT (SELECT l.namespace FROM leasestore_leases AS l INDEXED BY leasestore_leases_live
            WHERE l.namespace > ns.namespace AND l.swept_token IS NOT l.token AND l.expires_at > ?2
            ORDER BY l.namespace LIMIT 1)
    FROM ns WHERE ns.namespace IS NOT NULL
)
SELECT namespace FROM ns WHERE namespace IS NOT NULL LIMIT ?3`

	// qListAll is qList with expired leases too (set aside or not), for
	// owner ?7 unless it is "", through the primary key; ?5 is unused.
	qListAll = `
SELECT name, owner, token, acquired_at, renewed_at, expires_at, version, ` + leaseDelay + `
FROM leasestore_leases
WHERE namespace = ?1 AND name > ?2 AND name >= ?3 AND name < ?4
  AND (?7 = '' OR owner = ?7)
  AND ?5 IS NOT NULL
ORDER BY name
LIMIT ?6`

	// qAudit pages through the trail by id, oldest first, between ?1 and
	// ?5 (exclusive: after the cursor's id, below MaxInt64), in namespace
	// ?2 ("" for all), at or after ?3, of the ops in ?6 (",acquire,renew,":
	// each op between commas; "" for all) and of owner ?7 ("" for all); ?4
	// is the page size plus one. It walks the primary key (the id) and
	// filters: no index serves op or owner, so a filter that matches few
	// records reads further to fill a page (as a namespace filter does).
	qAudit = `
SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
       params_hash, expires_at, acquired_at, renewed_at, lock_delay
FROM leasestore_audit
WHERE id > ?1 AND id < ?5 AND (?2 = '' OR namespace = ?2) AND at >= ?3
  AND (?6 = '' OR instr(?6, ',' || op || ',') > 0) AND (?7 = '' OR owner = ?7)
ORDER BY id
LIMIT ?4`

	// qPrunedThrough is the greatest id a prune removed in namespace ?1
	// ("" for the whole trail; none: 0), by primary key (migration 7). A
	// read from a cursor below it fails rather than skip what went.
	qPrunedThrough = `SELECT coalesce((SELECT through FROM leasestore_audit_pruned WHERE namespace = ?1), 0)`

	// qAuditEnd is the last record id AUTOINCREMENT gave (none: 0), kept
	// in sqlite_sequence after the record went (a prune): no cursor of
	// this store lies past it.
	qAuditEnd = `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'leasestore_audit'), 0)`

	// qAuditTop is the greatest record id in the trail (none: 0), by
	// primary key: read before a follower's page, it is how far the page
	// passed (writers commit in id order, and AUTOINCREMENT never reuses
	// an id).
	qAuditTop = `SELECT coalesce(max(id), 0) FROM leasestore_audit`

	// qAuditNewest is qAudit newest first: ?1 is 0 and ?5 the cursor's id.
	qAuditNewest = `
SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
       params_hash, expires_at, acquired_at, renewed_at, lock_delay
FROM leasestore_audit
WHERE id > ?1 AND id < ?5 AND (?2 = '' OR namespace = ?2) AND at >= ?3
  AND (?6 = '' OR instr(?6, ',' || op || ',') > 0) AND (?7 = '' OR owner = ?7)
ORDER BY id DESC
LIMIT ?4`

	// qAuditKey is qAudit for one key (?2 namespace, ?8 name), served by the
	// (namespace, name, id) index.
	qAuditKey = `
SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
       params_hash, expires_at, acquired_at, renewed_at, lock_delay
FROM leasestore_audit
WHERE namespace = ?2 AND name = ?8 AND id > ?1 AND id < ?5 AND at >= ?3
  AND (?6 = '' OR instr(?6, ',' || op || ',') > 0) AND (?7 = '' OR owner = ?7)
ORDER BY id
LIMIT ?4`

	// qSinceStart finds where a read of the records at or after a time
	// may start: an id below which no record is at or after ?1 (that time
	// minus sinceSlack, µs), whatever the clocks that wrote them did, in
	// about 30 probes of the primary key, however long the trail. The
	// greatest time of the records up to an id grows with ids: it is the
	// record's own time or the top of the last step back at or before it
	// (leasestore_audit_steps, migration 12), whichever is greater. A
	// binary search over ids finds a record whose greatest time is before
	// ?1 close to the boundary and returns its id (none: 0, the start of
	// the trail); hi is an exclusive bound, and every step halves [lo, hi).
	qSinceStart = `
WITH RECURSIVE search(lo, hi, step) AS (
    SELECT e.lo, e.hi, 0
    FROM (SELECT (SELECT min(id) FROM leasestore_audit) AS lo, (SELECT max(id) FROM leasestore_audit) + 1 AS hi) AS e
    JOIN leasestore_audit AS m ON m.id = e.lo
    LEFT JOIN leasestore_audit_steps AS st ON st.id = (SELECT max(x.id) FROM leasestore_audit_steps x WHERE x.id <= m.id)
    WHERE max(m.at, coalesce(st.top, m.at)) < ?1
    UNION ALL
    SELECT CASE WHEN max(m.at, coalesce(st.top, m.at)) < ?1 THEN m.id ELSE s.lo END,
           CASE WHEN max(m.at, coalesce(st.top, m.at)) < ?1 THEN s.hi ELSE s.lo + (s.hi - s.lo) / 2 END,
           s.step + 1
    FROM search AS s
    JOIN leasestore_audit AS m
      ON m.id = (SELECT a.id FROM leasestore_audit a WHERE a.id >= s.lo + (s.hi - s.lo) / 2 ORDER BY a.id LIMIT 1)
    LEFT JOIN leasestore_audit_steps AS st ON st.id = (SELECT max(x.id) FROM leasestore_audit_steps x WHERE x.id <= m.id)
    WHERE s.hi - s.lo > 1 AND s.step < 100
)
SELECT coalesce((SELECT lo FROM search ORDER BY step DESC LIMIT 1), 0)`

	// qAuditKeyNewest is qAuditKey newest first, through the same index.
	qAuditKeyNewest = `
SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
       params_hash, expires_at, acquired_at, renewed_at, lock_delay
FROM leasestore_audit
WHERE namespace = ?2 AND name = ?8 AND id > ?1 AND id < ?5 AND at >= ?3
  AND (?6 = '' OR instr(?6, ',' || op || ',') > 0) AND (?7 = '' OR owner = ?7)
ORDER BY id DESC
LIMIT ?4`
)

// Pruning (see Backend.PruneAudit and the migration's prune window): in one
// transaction per batch, open the window for records before ?1, claim the
// request id for the prune's run, delete the oldest ?2 records before ?1
// after id ?4 that no live lease needs (pruneVictims), close the window.
//
// pruneVictims selects the ids and namespaces of the oldest ?2 records
// before ?1 whose id is greater than ?4 (the greatest id the prune's
// earlier batches took, 0 for the first: so the records it keeps are
// read once a prune, not again by every later batch) but those a retry of
// a change of a lease live at ?3 (now) is answered from (qFindRequest reads the trail by request id): the record
// of the acquire that issued the live lease's token, and of its latest
// renew (no later renew of the token on the key, through
// leasestore_audit_key). Records of a lease that ended, by release,
// revoke or expiry, and a live lease's earlier renews, go.
//
// qPruneClaim (migration 8) claims request id ?1 for the run ?2 (actor
// ?3, cut-off ?4, now ?5) unless a run holds it; qPruneHolder reads the
// run that holds it. qPruneUnclaim deletes the claim of ?1 that the run
// ?2 holds: in the last batch, or alone when the prune stops early.
//
// qPruneTaken reads, per namespace, how many of the records qPruneBatch
// deletes next (the oldest ?2 before ?1 after ?4) it takes and the greatest id of
// them: no other connection writes meanwhile (the transaction holds the
// write lock), so the DELETE removes exactly those unless a trigger keeps
// one (RAISE(IGNORE) before it), and the mark (qPrunedThrough) covers each
// namespace's greatest unless a trigger kept the store's own from firing
// (RAISE(IGNORE) after it). qTrailTriggers reads the name and text of each
// trigger on the trail, to name those that can have (Backend.PruneAudit).
const (
	qPruneOpen   = `INSERT INTO leasestore_audit_prune (id, before) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET before = excluded.before`
	pruneVictims = `
SELECT a.id, a.namespace FROM leasestore_audit a
WHERE a.id > ?4 AND a.at < ?1
  AND NOT EXISTS (SELECT 1 FROM leasestore_leases l
                  WHERE l.namespace = a.namespace AND l.name = a.name AND l.token = a.token AND l.expires_at > ?3
                    AND (a.op = 'acquire'
                         OR (a.op = 'renew'
                             AND NOT EXISTS (SELECT 1 FROM leasestore_audit r
                                             WHERE r.namespace = a.namespace AND r.name = a.name AND r.id > a.id
                                               AND r.op = 'renew' AND r.token = a.token))))
ORDER BY a.id LIMIT ?2`
	qPruneTaken   = `SELECT namespace, count(*), max(id) FROM (` + pruneVictims + `) GROUP BY namespace`
	qPruneBatch   = `DELETE FROM leasestore_audit WHERE id IN (SELECT id FROM (` + pruneVictims + `))`
	qPruneClose   = `DELETE FROM leasestore_audit_prune WHERE id = 1`
	qPruneClaim   = `INSERT INTO leasestore_audit_prune_claim (request_id, run, actor, before, at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (request_id) DO NOTHING`
	qPruneHolder  = `SELECT run FROM leasestore_audit_prune_claim WHERE request_id = ?1`
	qPruneUnclaim = `DELETE FROM leasestore_audit_prune_claim WHERE request_id = ?1 AND run = ?2`

	qTrailTriggers = `SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'leasestore_audit' COLLATE NOCASE ORDER BY name`
)

// qSweep removes up to ?3 rows of leases that expired (and whose
// lock-delay, if any, ended) before ?1 - ?2 (now minus the grace, in
// microseconds). The fencing counter has issued every token, so a key
// acquired after its row is gone still gets a greater one.
const qSweep = `
DELETE FROM leasestore_leases
WHERE (namespace, name) IN (SELECT namespace, name FROM leasestore_leases WHERE expires_at + lock_delay < ?1 - ?2 LIMIT ?3)`

// qSweepDelays removes up to ?2 lock-delays of revoked leases that ended
// by ?1 now.
const qSweepDelays = `
DELETE FROM leasestore_lock_delays
WHERE (namespace, name) IN (SELECT namespace, name FROM leasestore_lock_delays WHERE ended_at + lock_delay <= ?1 LIMIT ?2)`

// qSetAside takes up to ?2 rows of leases expired at ?1 out of the live
// indexes (swept_token = token, see migration 3). Their leases answer as
// before; an acquire changes the token and so puts the row back.
const qSetAside = `
UPDATE leasestore_leases SET swept_token = token
WHERE (namespace, name) IN (SELECT namespace, name FROM leasestore_leases
                            WHERE swept_token IS NOT token AND expires_at <= ?1 LIMIT ?2)`

// Waking waiters (notify.go): a connection of its own polls qDataVersion,
// which changes when another connection, of this process or another,
// committed; then qWakeTop reads the newest audit id and the greatest id a
// prune removed (leasestore_audit_pruned), and qWakeKeys which keys were
// released or revoked, or renewed to end earlier than their previous
// acquire or renew said, since the last look, ?1 the last id seen and ?2
// the newest. A renew's previous record is one probe of
// leasestore_audit_key; a renew whose previous record was pruned wakes
// (it may have shortened the lease).
const (
	qDataVersion = `PRAGMA data_version`
	qWakeTop     = `SELECT coalesce((SELECT max(id) FROM leasestore_audit), 0), coalesce((SELECT through FROM leasestore_audit_pruned WHERE namespace = ''), 0)`
	qWakeKeys    = `
SELECT id, namespace, name FROM leasestore_audit
WHERE id > ?1 AND id <= ?2 AND (op IN ('release', 'revoke') OR op = 'renew' AND coalesce(expires_at < (
    SELECT p.expires_at FROM leasestore_audit p
    WHERE p.namespace = leasestore_audit.namespace AND p.name = leasestore_audit.name AND p.id < leasestore_audit.id
      AND p.op IN ('acquire', 'renew')
    ORDER BY p.id DESC LIMIT 1), 1))
ORDER BY id`

	// qSavepoint, qRollbackSavepoint and qReleaseSavepoint bracket each
	// write of a coalesced transaction (see coalesce.go).
	qSavepoint         = `SAVEPOINT leasestore_write`
	qRollbackSavepoint = `ROLLBACK TO SAVEPOINT leasestore_write`
	qReleaseSavepoint  = `RELEASE SAVEPOINT leasestore_write`
)
