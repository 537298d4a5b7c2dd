// Package postgres is leasestore's PostgreSQL backend, on pgx/v5 and its
// pool (pgxpool). [Open] makes a backend that owns its pool; [New] wraps a
// pool the caller owns. Either way the backend implements
// [protocol.Backend] (wrap it in a [protocol.Runtime]), [audit.Reader] and
// [audit.Pruner].
//
// # One statement per operation
//
// Every lease operation is one SQL statement, so one network round trip:
// the idempotency look-up, the conditional change, the fencing token and
// the audit record are one atomic step. Expiry is judged by
// the server's clock: a change reads it after it took its key's writer
// lock, so the time it records is the time it took effect, after any wait
// (a snapshot's refusal is judged at now(), the statement's start); tests
// of this package alone can inject a clock. A change that did not happen returns,
// through leasestore_outcome, what the answer needs (the earlier record of
// the request id, or the key's row), read only on that path. A change
// whose audit record was not written (the session sees no row of
// leasestore_audit_era, or a trigger dropped the record) fails, and
// nothing of it is committed: a request id's retry is answered from the
// record.
//
// Every part of a statement sees the snapshot taken when it starts, while
// UPDATE and INSERT ... ON CONFLICT lock the row and re-check their
// condition on its newest version (read committed, which the pools of Open
// pin). When the two disagree, another writer's change of the key
// committed after the snapshot and before the statement got the key's
// lock, which it holds to its commit; the statement then reads its outcome
// with leasestore_outcome_fresh (migration 9), whose query takes a
// snapshot of its own that shows that change: the conflict with the new
// holder, the replay of a copy of the request, the refusal of a lease
// revoked meanwhile, judged at the time the write judged the row (after
// the lock), all in the one round trip. Only an acquire that finds
// the key free in that newest state and still could not take it (its
// drawn token is not above the key's: a cached or restored sequence) runs
// again, with a fresh snapshot. A statement whose audit insert meets a
// concurrent request with its request id (a copy of a renew, whose change
// both would make) fails and runs again, and so does a serialization
// failure or deadlock (under a stricter isolation level on a borrowed pool,
// where the race above is such a failure); the request id makes that safe.
//
// # Coalescing
//
// Operations that wait at the same moment share a round trip and a commit:
// a backend keeps at most [Config.MaxInFlight] state-changing round trips
// in flight (not counting those a key holds up: the queue goes over the
// cap behind them), an operation that finds one free runs its own statement at
// once (a lone caller never waits), and the operations that queued while
// all were taken go to the server together, applied in order by a
// temporary function of the connection, each in a subtransaction of its
// own: each is still atomic, fenced, audited and idempotent, sees the
// changes of those before it, and fails alone. Such a batch is one transaction, so its
// records share one commit; each still has an id of its own (the
// subtransaction's transaction id). [Config.NoCoalescing] turns it off.
//
// Released and revoked leases leave their row as a tombstone (empty owner),
// so a key's last token is always known: an acquire takes a token greater
// than both the sequence's next value and the key's last token, so tokens
// of a key increase whatever the sequence's state.
//
// # The audit trail
//
// A record's id is its writer's transaction id plus an era offset. Writers
// of one key take a transaction-scoped advisory lock on the key before they
// write, so they get their transaction ids, and commit, in turn: a key's
// records are in the order its changes happened. A follower
// ([audit.Query].Follow) reads only below the oldest transaction in
// progress (pg_snapshot_xmin): every transaction below it has ended, so no
// record can still appear below it, on a primary or a hot standby. A
// transaction left open anywhere in the cluster holds followers back
// ([audit.Page].HeldBack says so) but never makes them skip.
//
// A restore into another cluster, or a switchover, starts transaction ids
// lower. A write whose id would not sort after every record it can see (on
// the cluster that wrote them, ids are always greater: a transaction id is
// assigned after the snapshot) fails with SQLSTATE LS001 instead, and the
// backend starts a new era (leasestore_audit_new_era) and runs it again; Open
// and Health do the same on sight.
//
// # Waking waiters
//
// The backend implements [protocol.Notifier] with LISTEN/NOTIFY on a
// connection of its own, and the release and revoke statements notify only
// when some process waits for the key, which the database's lock table
// tells them.
//
// # Schema
//
// The database objects (tables leasestore_leases, leasestore_audit,
// leasestore_audit_era, leasestore_audit_prune, leasestore_audit_pruned and
// leasestore_compat, the sequence leasestore_fencing_seq, functions
// leasestore_outcome, leasestore_outcome_fresh, leasestore_audit_refuse,
// leasestore_audit_went_back, leasestore_audit_new_era,
// leasestore_audit_keep_pruned, leasestore_audit_pruned_through and
// leasestore_audit_pruned_mark, and
// goose's leasestore_goose_db_version) live
// in the connection's schema: the first schema of its search_path. To give
// leasestore a schema of its own, put it in the DSN, for example
//
//	postgres://app@db/prod?options=-csearch_path%3Dleasestore
//
// so that every pooled connection uses it. The backend remembers the
// schema it opened the store in, and Health refuses a connection whose
// current schema has become another (a schema created before it in the
// search_path), naming both. The backend never migrates: it
// refuses to open a schema older than [migrations.LatestVersion], or newer
// and not declared servable by this release, and says what to run.
//
// This package is the only one that imports pgx; protocol, audit and
// sqlstore stay free of drivers.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/pgschema"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore"
)

// Name is what [Backend.Name] returns.
const Name = "postgres"

// DefaultApplicationName is the application_name the pool of [Open] reports
// to the server (pg_stat_activity) when neither [Config.ApplicationName] nor
// the DSN sets one.
const DefaultApplicationName = "leasestore"

// statementTimeout is the statement_timeout of the pools Open makes, and
// statementSlack how much earlier than its place in the trail a record's
// time may be: a statement's run time, with a margin. A read of the
// records since T searches for a record older than T - statementSlack to
// start at, and then starts before any record at or below it that is at or
// after T (sinceStartSQL): a record written by a statement that ran longer,
// or before the server's clock stepped back, is not left out, only found
// by the check, which costs more the more such records there are.
const (
	statementTimeout = 30 * time.Second
	statementSlack   = 2 * statementTimeout
)

// cancelGrace is how long, after an operation's context ends, the
// connection waits for the server to answer the cancel request before it
// gives up on the connection (see Open).
const cancelGrace = 500 * time.Millisecond

// Config tunes a [Backend]. A nil *Config means all defaults. The pool
// settings (ApplicationName, MaxConns) apply only to the pool that [Open]
// makes; [New] leaves the caller's pool as it is.
type Config struct {
	// ApplicationName is reported to the server as application_name by
	// the pool [Open] makes ([New] refuses it: set it on your pool).
	// Default: the DSN's application_name, else [DefaultApplicationName].
	ApplicationName string
	// MaxConns caps the pool [Open] makes ([New] refuses it: set it on
	// your pool). Default: the DSN's pool_max_conns, else pgxpool's
	// default (the larger of 4 and the number of CPUs). Open refuses
	// fewer than 2 as invalid: an operation waiting for a key another
	// session keeps locked holds its connection, and with one every
	// operation on another key would wait behind it. New accepts a pool
	// of one connection as it is (tests count round trips on one), with
	// that wait.
	MaxConns int32
	// MaxInFlight caps the ordinary state-changing round trips (acquire,
	// renew, release, revoke) the backend has in flight at once.
	// Operations that arrive while all are taken wait and then go to the
	// server together, as one statement and one commit (coalescing: applied
	// in arrival order, each in a subtransaction of its own, seeing the
	// changes of those before it and failing alone), each still atomic,
	// fenced, audited and idempotent on its own; an operation whose batch
	// could not tell its outcome (the statement failed as a whole, or its
	// key was held by another transaction) runs again alone, with its
	// request id. An operation that finds a free slot never waits. Default
	// (0): the cap adapts to measured latency, up to the pool's size while
	// the server answers more round trips as fast as one, down to
	// [DefaultMaxInFlight] when it queues them (see
	// backendkit.Coalescer.Adapt). Fixed or adaptive, stuck round trips do
	// not count against it: a queued operation waits for a slot while the
	// round trips in flight take their usual time, and once one overran (a
	// key holding it up) a round trip starts for the queue, over the cap
	// but within the pool's size, after twice a lone round trip's latency,
	// so operations waiting on their keys delay no operation on another
	// key (see backendkit.Coalescer.Unstick).
	MaxInFlight int
	// NoCoalescing sends every operation as its own statement (as many at
	// once as the pool allows), for comparison. Default: false, operations
	// are coalesced (except behind a transaction pooler, see Pooler).
	NoCoalescing bool
	// Pooler says whether a connection pooler that does not keep sessions
	// (PgBouncer's pool_mode=transaction or statement) is between the
	// backend and the server: [PoolerTransaction], [PoolerSession], or
	// [PoolerDetect]. Behind one the backend keeps no session state: no
	// SET, no prepared statements, no coalescing, no LISTEN (see
	// ListenDSN). Default: the DSN's pooler parameter (?pooler=transaction),
	// else PoolerDetect: a pooler is found by the server process id.
	Pooler string
	// ListenDSN is a DSN that reaches the same database and schema
	// directly, not through a pooler, for the connection that listens for
	// released keys on behalf of waiting acquires (LISTEN and session
	// advisory locks need a session of their own). A listener that reaches
	// another database or schema than the pool's is refused (Subscribe
	// answers unavailable, and waiters poll), as is one whose pooler
	// parameter says a pooler that keeps no sessions is in front
	// (pooler=session is taken out). Default: the pool's
	// DSN, or, behind a transaction pooler, none: waiting acquires poll
	// (protocol.WaitConfig.Recheck, one second by default).
	ListenDSN string
	// ListenerIdle is how long the connection that listens for released
	// keys on behalf of waiting acquires (a connection of its own, outside
	// the pool, opened at the first wait) stays open once no acquire waits
	// any more; the next wait opens it again. Default:
	// [DefaultListenerIdle] (30s).
	ListenerIdle time.Duration

	// testNow replaces the server's clock in this package's tests (see
	// export_test.go); production code cannot set it, since expiry must be
	// judged by the one clock every process shares, the server's.
	testNow func() time.Time
	// testBetweenPruneBatches runs in this package's tests (see
	// export_test.go) after each prune batch that committed and was not
	// the prune's last, before the next begins.
	testBetweenPruneBatches func()
	// testHeldQueue keeps a fixed MaxInFlight's queue waiting for a slot
	// however long, in this package's tests that form a batch behind a
	// slot they hold (see export_test.go).
	testHeldQueue bool
	// testBeforeReconnect runs in this package's tests (see
	// export_test.go) each time the listener is about to connect again
	// after its connection broke (or an attempt failed).
	testBeforeReconnect func()
}

// Backend is the PostgreSQL lease backend. It is safe for concurrent use.
// Close closes the pool only when the backend owns it (made by [Open]).
// Called directly, an operation whose context carries no deadline
// (Acquire, Renew, RenewMany, Release, Revoke, Get, List, ReadAudit,
// Namespaces, Sweep, Health) gets the runtime's default,
// [protocol.DefaultTimeout], so that it answers timeout rather than
// waiting for ever for a server that stopped answering.
type Backend struct {
	pool     *pgxpool.Pool
	ownsPool bool
	now      func() time.Time
	listen   listener              // wakes waiters of released and revoked keys (notify.go)
	co       *coalescer            // nil with Config.NoCoalescing
	noBatch  atomic.Bool           // the server refused the batch function (no TEMP privilege), or a pooler is in front: never batch
	pooled   bool                  // a pooler that keeps no sessions is in front (pooler.go)
	closed   atomic.Bool           // set as Close begins: every call then answers closed (callRefusal)
	drops    backendkit.Background // prunes' claims being freed after their prune answered (prune.go)
	// closer runs Close's work (shut) once, in a goroutine, and lets a
	// Close whose context ends answer while that work waits for what is
	// in flight.
	closer backendkit.Closer
	// tests only (export_test.go): run instead of changeBatchFnSQL
	testBatchFnSQL string
	// tests only (export_test.go): see Config.testBetweenPruneBatches
	betweenPruneBatches func()
	// schema is the connection's current schema that Open or New found
	// the store in (checkSchema); checkSettings refuses another.
	schema string
}

var (
	_ protocol.Backend     = (*Backend)(nil)
	_ audit.Reader         = (*Backend)(nil)
	_ protocol.BulkRenewer = (*Backend)(nil)
)

// Open connects to the PostgreSQL server named by dsn (a pgx connection
// string: postgres://... or key=value pairs, including pgxpool's pool_*
// settings), checks that it answers and that the connection's schema is
// migrated to [migrations.LatestVersion], and returns a backend that owns
// the pool: [Backend.Close] closes it. cfg may be nil.
//
// The pool cancels a statement on the server when its context ends (a
// cancel request, with the connection's deadline as a fallback after half a
// second), so an operation that timed out does not go on to take effect
// long after its caller gave up. The effect of a timed-out operation is
// still unknown to the caller: retry with the same request id to learn it.
// Such an operation answers timeout saying that the deadline passed (its
// error matches [context.DeadlineExceeded]); one whose statement was
// cancelled from the server's side while its context was live says that
// the server cancelled it: timeout for a statement_timeout, unavailable
// for another session's pg_cancel_backend (no deadline passed).
//
// Errors never contain the DSN's password; a URL DSN that pgx would read
// with part of its password elsewhere (an '@' in it written as is) is
// refused as invalid ([CheckDSN]). Errors about the schema are
// *[protocol.Error] values with status unavailable that name
// `leasectl migrate up`.
func Open(ctx context.Context, dsn string, cfg *Config) (*Backend, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := CheckDSN(dsn); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, backendkit.NewError("", protocol.StatusInvalid, redacted(err, dsnPassword(dsn)), "postgres: parse dsn")
	}
	password := pcfg.ConnConfig.Password
	switch {
	case cfg.ApplicationName != "":
		pcfg.ConnConfig.RuntimeParams["application_name"] = cfg.ApplicationName
	case pcfg.ConnConfig.RuntimeParams["application_name"] == "":
		pcfg.ConnConfig.RuntimeParams["application_name"] = DefaultApplicationName
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if err := poolTooSmall("open", pcfg.MaxConns, "Config.MaxConns or the DSN's pool_max_conns"); err != nil {
		return nil, err
	}
	mode, err := poolerMode(cfg, pcfg)
	if err != nil {
		return nil, err
	}
	// Session settings are pinned on each new connection, whatever the
	// role, the database or the DSN say, unless a pooler is in front: see
	// pinSettingsSQL. The DSN's own statement_timeout is kept.
	pinTimeout := strconv.Itoa(int(statementTimeout.Milliseconds()))
	if _, ok := pcfg.ConnConfig.RuntimeParams["statement_timeout"]; ok {
		pinTimeout = ""
	}
	pcfg.ConnConfig.BuildContextWatcherHandler = newContextWatcher
	pcfg.ShouldPing = shouldPing
	newPool := func(pooled bool) (*pgxpool.Pool, error) {
		c := pcfg.Copy()
		if pooled {
			// No named prepared statements: the next transaction may run
			// on another server connection.
			c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		} else {
			c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
				direct, err := pinSession(ctx, conn, mode == PoolerDetect, pinTimeout)
				if err == nil && !direct {
					err = errSessionsNotKept
				}
				return err
			}
		}
		pool, err := pgxpool.NewWithConfig(ctx, c)
		if err != nil {
			return nil, redacted(interpretCallError(ctx, "", err), password)
		}
		return pool, nil
	}
	pooled := mode == PoolerTransaction
	pool, err := newPool(pooled)
	if err != nil {
		return nil, err
	}
	if mode == PoolerDetect {
		// The first connection tells (its AfterConnect); another error is
		// check's to report.
		c, err := pool.Acquire(ctx)
		if err == nil {
			c.Release()
		} else if errors.Is(err, errSessionsNotKept) {
			pool.Close()
			if pool, err = newPool(true); err != nil {
				return nil, err
			}
			pooled = true
		}
	}
	b := newBackend(pool, true, cfg, pooled)
	if err := b.check(ctx); err != nil {
		pool.Close()
		return nil, redacted(err, password)
	}
	return b, nil
}

// New returns a backend over pool, which the caller owns: [Backend.Close]
// leaves it open, and the caller closes it after the backend is closed.
// Like [Open], it checks that the server answers and that the pool's schema
// (the search_path of its connections) is at [migrations.LatestVersion].
// The pool's own settings are used as they are: a cfg that sets
// ApplicationName or MaxConns is refused rather than ignored. cfg may be
// nil.
func New(ctx context.Context, pool *pgxpool.Pool, cfg *Config) (*Backend, error) {
	if pool == nil {
		return nil, errors.New("postgres: new: nil pool")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.ApplicationName != "" || cfg.MaxConns != 0 {
		return nil, errors.New("postgres: new: Config.ApplicationName and Config.MaxConns configure the pool Open makes; " +
			"New uses your pool as it is: set application_name and pool_max_conns on it (pgxpool.ParseConfig)")
	}
	if _, err := poolerMode(cfg, &pgxpool.Config{ConnConfig: &pgx.ConnConfig{}}); err != nil {
		return nil, err
	}
	pooled := cfg.Pooler == PoolerTransaction
	if cfg.Pooler == PoolerDetect {
		var err error
		if pooled, err = throughPooler(ctx, pool); err != nil {
			return nil, interpretCallError(ctx, "", err)
		}
	}
	b := newBackend(pool, false, cfg, pooled)
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// minPoolConns is the smallest pool a backend serves: an operation that
// waits for its key (a row another session keeps locked) holds its
// connection meanwhile, and with one connection every operation on any
// other key would wait behind it.
const minPoolConns = 2

// poolTooSmall is the refusal (invalid) by Open (call) of a pool of
// maxConns connections, fewer than minPoolConns; set names where the size
// comes from. nil when the pool is large enough.
func poolTooSmall(call string, maxConns int32, set string) error {
	if maxConns >= minPoolConns {
		return nil
	}
	return backendkit.NewError("", protocol.StatusInvalid, nil,
		"postgres: %s: the pool may open %d connection, and an operation waiting for a key another session "+
			"keeps locked would hold it, so operations on every other key would wait behind it: set %s to "+
			"at least %d (pool_max_conns=%d)", call, maxConns, set, minPoolConns, minPoolConns)
}

// newBackend returns a backend over pool; pooled says a pooler that keeps
// no sessions is in front (see pooler.go).
func newBackend(pool *pgxpool.Pool, owns bool, cfg *Config, pooled bool) *Backend {
	b := &Backend{pool: pool, ownsPool: owns, now: cfg.testNow, pooled: pooled, betweenPruneBatches: cfg.testBetweenPruneBatches,
		listen: listener{idle: cfg.ListenerIdle, dsn: cfg.ListenDSN, beforeReconnect: cfg.testBeforeReconnect}}
	b.noBatch.Store(pooled) // the batch function is a temporary object
	if !cfg.NoCoalescing && !pooled {
		b.co = newCoalescer(b, cfg.MaxInFlight, int(pool.Config().MaxConns), !cfg.testHeldQueue)
	}
	return b
}

// check is what Open and New verify before they return a backend: the
// schema's version, then the settings that fencing depends on.
func (b *Backend) check(ctx context.Context) error {
	if err := b.checkSchema(ctx); err != nil {
		return err
	}
	return b.checkSettings(ctx, "")
}

// checkSettings refuses what would break a guarantee or change answers, and
// repairs what it can, in one round trip (two when it repairs):
//
//   - a schema this release cannot serve (as checkSchema judges it): one
//     rolled back, or moved past what this release serves, after Open.
//   - synchronous_commit off or local: a crash could lose a committed
//     acquire and issue its token again. The pools Open makes pin it; a
//     borrowed pool, or one behind a transaction pooler (where nothing is
//     pinned), is refused, naming the fix.
//   - lock_timeout or idle_in_transaction_session_timeout set below the
//     backend's own statement bound (statementTimeout): operations that
//     wait a moment for a key would answer timeout, a prune could be cut
//     half way. The pools Open makes pin both to 0; a borrowed pool, or one
//     behind a transaction pooler, is refused, naming the fix.
//   - session_replication_role replica: the triggers that keep the audit
//     trail append-only do not fire. Refused.
//   - a trigger of the audit trail that does not fire (a DBA's ALTER
//     TABLE leasestore_audit DISABLE TRIGGER, USER or ALL or by name, or
//     ENABLE REPLICA TRIGGER, or a dropped one; see settingsSQL): the same
//     effect, trigger by trigger: the trail can be edited, or a prune
//     leaves no mark, so a reader behind it skips the removed records
//     silently. Refused, naming the ENABLE TRIGGER that fixes it. The
//     schema's version is judged first (the mark's trigger comes with
//     version 7: a schema rolled back below it is named as such). The
//     same for the prune window's guard (version 8): without it a role
//     that may not delete audit records can open the window.
//   - what a DBA did to the store's tables and sequence (storeObjectsError):
//     row-level security that applies to the role (rows are hidden from
//     its statements), leasestore_audit_era without its row (no change
//     can be recorded), an unlogged table or sequence (a crash empties
//     it; no standby has it), a trigger that is not the store's own (it
//     can change or drop what the store writes), a rule (it rewrites the
//     store's statements), a committed row of the prune window
//     leasestore_audit_prune (a DBA's by hand: it lets any DELETE of the
//     records before its cut-off through the trail's append-only trigger;
//     a prune's own row is never committed, so no other session sees it).
//     Refused, naming each and its fix.
//   - at Health only (a standby serves reads, so Open accepts it): a
//     server in recovery, or sessions that are read-only by default
//     (default_transaction_read_only, as a role or database may set it):
//     every write would fail. Refused, naming the reason. So is a role
//     that lacks a privilege writes need (a REVOKE while the service
//     runs, or a role granted reads only: privilegesError).
//   - a fencing sequence that caches values: sessions would hand out tokens
//     out of order. Tokens of a key still increase (every acquire takes
//     more than the key's last token), but the sequence must be fixed.
//   - a fencing sequence that counts down (INCREMENT BY a negative step) or
//     cycles (CYCLE: past its MAXVALUE it starts again at its MINVALUE):
//     an acquire of a key whose row the sweep removed could draw a token
//     the key had (the sweep removes no row meanwhile, see sweepSQL), and
//     the repair below would wrap it again. Refused (sequenceError).
//   - a fencing sequence with no value left below its MAXVALUE: every
//     acquire fails (SQLSTATE 2200H, which interpretError names the same
//     way). Refused.
//   - a fencing sequence behind the tokens already issued (a logical
//     replication switchover, or a restore that did not carry it): harmless
//     for keys with a row (an acquire takes more than the key's last token,
//     and takes the row only if no other acquire took it since its
//     snapshot), and repaired here by moving the sequence past every token
//     in leasestore_leases (not on a read-only connection).
//   - transaction ids that map below the newest audit record (a restore
//     into another cluster, a switchover): a new era of audit ids starts,
//     so that new records sort after every earlier one. (A write that meets
//     this first does the same.)
func (b *Backend) checkSettings(ctx context.Context, op protocol.Op) error {
	var (
		syncCommit, replicationRole string
		seq                         fencingSeq
		lockMS, idleTxMS            int64
		behind, moved               bool
		readOnly, recovery          bool
		schema                      string
		version, oldest             int64
		triggers, objects           []string
	)
	err := retrySerialization(ctx, op, func() error {
		return interpretCallError(ctx, op, b.pool.QueryRow(ctx, settingsSQL).Scan(&syncCommit,
			&seq.cache, &seq.increment, &seq.cycle, &seq.min, &seq.max, &behind, &seq.exhausted, &moved,
			&lockMS, &idleTxMS, &replicationRole, &readOnly, &recovery, &schema, &version, &oldest, &triggers, &objects))
	})
	if err != nil && isMissingSchema(err) {
		// A schema below the version whose tables settingsSQL reads (rolled
		// back beneath a running release): name its version and the fix
		// as Open does, not the missing relation.
		var pe *protocol.Error
		if serr := b.checkSchema(ctx); errors.As(serr, &pe) {
			pe.Op = op
			return pe
		}
	}
	if err != nil {
		return err
	}
	if schema != b.schema {
		return schemaMovedError(op, b.schema, schema)
	}
	if !sqlstore.ServesSchema(version, oldest, migrations.LatestVersion) {
		e := sqlstore.SchemaVersionError(version, migrations.LatestVersion, fmt.Sprintf("postgres schema %q", schema))
		e.Op = op
		return e
	}
	if syncCommit == "off" || syncCommit == "local" {
		return backendkit.NewError(op, protocol.StatusUnavailable, nil,
			"postgres: synchronous_commit is %q on this pool's connections, so a crash can lose a committed acquire "+
				"and issue its token again: set it to on (ALTER ROLE ... SET synchronous_commit = on) or let "+
				"postgres.Open make the pool", syncCommit)
	}
	for _, t := range []struct {
		name, effect string
		ms           int64
	}{
		{"lock_timeout", "an operation that waits longer for its key answers timeout although it would have succeeded", lockMS},
		{"idle_in_transaction_session_timeout", "a prune's transaction can be cut between its statements", idleTxMS},
	} {
		if t.ms > 0 && t.ms < statementTimeout.Milliseconds() {
			return backendkit.NewError(op, protocol.StatusUnavailable, nil,
				"postgres: %s is %s on this pool's connections, so %s: set it to 0 for the pool's role or in its "+
					"RuntimeParams, or let postgres.Open make the pool (it pins it to 0)",
				t.name, time.Duration(t.ms)*time.Millisecond, t.effect)
		}
	}
	if replicationRole == "replica" {
		return backendkit.NewError(op, protocol.StatusUnavailable, nil,
			"postgres: session_replication_role is replica on this pool's connections, so the triggers that keep "+
				"the audit trail append-only do not fire: set it to origin (ALTER ROLE ... RESET session_replication_role)")
	}
	if len(triggers) > 0 {
		return auditTriggersError(op, triggers)
	}
	if err := storeObjectsError(op, version, objects); err != nil {
		return err
	}
	if op == protocol.OpHealth && recovery {
		return backendkit.NewError(op, protocol.StatusUnavailable, nil,
			"postgres: the server is a standby in recovery (pg_is_in_recovery()), so every write fails: "+
				"point the DSN at the primary (a standby serves get, list and audit only)")
	}
	if op == protocol.OpHealth && readOnly {
		return backendkit.NewError(op, protocol.StatusUnavailable, nil,
			"postgres: the connections are read-only (default_transaction_read_only is on for the role, the "+
				"database or the DSN), so every write fails: connect as a role that can write, or "+
				"ALTER ROLE ... SET default_transaction_read_only = off")
	}
	if op == protocol.OpHealth {
		if err := privilegesError(op, objects); err != nil {
			return err
		}
	}
	if readOnly || recovery {
		return nil // nothing can be repaired through a read-only connection
	}
	if err := sequenceError(op, seq); err != nil {
		return err
	}
	if behind {
		if _, err := b.pool.Exec(ctx, repairSequenceSQL); err != nil {
			return interpretCallError(ctx, op, err)
		}
	}
	if moved {
		if _, err := b.pool.Exec(ctx, newEraSQL); err != nil {
			return interpretCallError(ctx, op, err)
		}
	}
	return nil
}

// schemaMovedError is checkSettings' refusal of a connection whose current
// schema (now) is no longer the one the backend opened the store in (was):
// a schema was created before it in the search_path (the default "$user",
// public, once a DBA creates the role's schema). The statements name the
// store's objects unqualified, so they resolve to the new schema's as soon
// as it has any (a second store migrated there would start its fencing
// sequence again at 1), and a waiter's wake-up names the new schema.
func schemaMovedError(op protocol.Op, was, now string) error {
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
		"postgres: the connection's schema is now %s, not %s where the store was opened: a schema was created "+
			"before the store's in the search_path, and its objects would take over the store's statements: put %s "+
			"first in the DSN's search_path (options=-csearch_path%%3D...), or drop schema %s if it was created "+
			"by mistake (a changed DSN takes a restart)", pgschema.QuoteIdent(now), pgschema.QuoteIdent(was),
		pgschema.QuoteIdent(was), pgschema.QuoteIdent(now))
}

// fencingSeq is the state of leasestore_fencing_seq that sequenceError
// judges, as pg_sequence holds it: its cache, increment, whether it cycles,
// its MINVALUE and MAXVALUE, and whether its next value would pass the
// MAXVALUE (from the greatest token issued: settingsSQL; RaiseTokens leaves
// that to setval, which refuses to pass it).
type fencingSeq struct {
	cache, increment int64
	cycle            bool
	min, max         int64
	exhausted        bool
}

// sequenceError is the refusal of a fencing sequence that would not hand
// out ever greater tokens, by checkSettings and RaiseTokens, naming the
// ALTER SEQUENCE that fixes all it found; nil when there is none. A
// sequence that caches values (CACHE > 1) hands them out of order across
// sessions; one that counts down (INCREMENT BY below 1) or cycles (CYCLE)
// gives an acquire of a key whose row the sweep removed a token the key
// had; one with no value left below its MAXVALUE fails every acquire.
func sequenceError(op protocol.Op, s fencingSeq) error {
	var what, fix []string
	if s.cache > 1 {
		what = append(what, fmt.Sprintf("caches %d values per session, so sessions issue tokens out of order", s.cache))
		fix = append(fix, "CACHE 1")
	}
	if s.increment < 1 || s.cycle {
		var how []string
		if s.increment < 1 {
			how = append(how, fmt.Sprintf("counts down (INCREMENT BY %d)", s.increment))
		}
		if s.cycle {
			how = append(how, fmt.Sprintf("cycles (CYCLE: past its MAXVALUE %d it starts again at %d)", s.max, s.min))
		}
		what = append(what, strings.Join(how, " and ")+", so an acquire of a key whose row gc removed can be given "+
			"a token the key had (the next Open or Health after the fix moves it past the tokens issued)")
		fix = append(fix, "INCREMENT BY 1 NO CYCLE")
	}
	if s.exhausted {
		if s.increment >= 1 && !s.cycle {
			what = append(what, fmt.Sprintf("has no value left below its MAXVALUE %d, so every acquire fails", s.max))
		}
		fix = append(fix, "NO MAXVALUE")
	}
	if len(what) == 0 {
		return nil
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
		"postgres: leasestore_fencing_seq %s: run ALTER SEQUENCE leasestore_fencing_seq %s",
		strings.Join(what, "; it "), strings.Join(fix, " "))
}

// auditTriggersError is checkSettings' refusal of the store's own
// triggers that do not fire, given as settingsSQL reads them (name=state,
// the state pg_trigger's tgenabled: D disabled, R fires only in replica
// sessions; - missing), naming what each one's absence allows and the
// statements that fix it.
func auditTriggersError(op protocol.Op, triggers []string) *protocol.Error {
	var what, fix, effects []string
	edited, unmarked, unguarded := false, false, false
	for _, t := range triggers {
		name, state, _ := strings.Cut(t, "=")
		table, from, enable := "leasestore_audit", "00001_leasestore.sql", "ENABLE TRIGGER"
		switch name {
		case "leasestore_audit_keep_pruned":
			unmarked, from = true, "00007_prune_horizon.sql"
		case "leasestore_audit_prune_window_guard":
			// ENABLE ALWAYS, as migration 8 leaves it: also in replica sessions.
			unguarded, table, from, enable = true, "leasestore_audit_prune", "00008_prune_claim.sql", "ENABLE ALWAYS TRIGGER"
		default:
			edited = true
		}
		switch state {
		case "D":
			what = append(what, name+" is disabled")
			fix = append(fix, "ALTER TABLE "+table+" "+enable+" "+name)
		case "R":
			what = append(what, name+" fires only in replica sessions (ENABLE REPLICA TRIGGER)")
			fix = append(fix, "ALTER TABLE "+table+" "+enable+" "+name)
		default:
			what = append(what, name+" is missing")
			fix = append(fix, "create "+name+" again as migrations/postgres/"+from+" does")
		}
	}
	if edited {
		effects = append(effects, "the trail can be edited or emptied (UPDATE, DELETE, TRUNCATE)")
	}
	if unmarked {
		effects = append(effects, "a prune leaves no mark, so a reader behind it skips the removed records silently")
	}
	if unguarded {
		effects = append(effects, "a role that may not delete audit records can open the prune window "+
			"(leasestore_audit_prune) and take or free a prune's request id")
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
		"postgres: the store's triggers do not all fire (%s), so %s: run %s",
		strings.Join(what, ", "), strings.Join(effects, ", and "), strings.Join(fix, "; "))
}

// storeObjectsError is checkSettings' refusal of what a DBA did to the
// store's tables and sequence, given as settingsSQL reads it
// (kind/object[/detail]), naming what each breaks and the statement that
// fixes it; nil when there is nothing. On a schema newer than this
// release's (a rolling deploy migrated first), a trigger or rule whose
// name begins with leasestore_ is taken for the newer migrations' own:
// every object the migrations make is named so.
func storeObjectsError(op protocol.Op, version int64, objects []string) error {
	var what, fix, triggers, rules []string
	hidden := map[string]bool{}
	for _, o := range objects {
		if kind, table, _ := strings.Cut(o, "/"); kind == "rls" {
			hidden[table] = true
		}
	}
	for _, o := range objects {
		kind, rest, _ := strings.Cut(o, "/")
		table, detail, _ := strings.Cut(rest, "/")
		if (kind == "trigger" || kind == "rule") && version > migrations.LatestVersion && strings.HasPrefix(detail, "leasestore_") {
			continue
		}
		switch kind {
		case "rls":
			effect := "a live lease reads as none, a request id's record as never written"
			if table == "leasestore_audit_era" {
				effect = "no change can write its audit record"
			}
			what = append(what, "row-level security applies to the DSN's role on "+table+
				", so the store's statements see only the rows a policy shows it ("+effect+")")
			fix = append(fix, "ALTER TABLE "+table+" DISABLE ROW LEVEL SECURITY")
		case "era":
			if hidden[table] {
				continue // the row may only be hidden: the fix above shows it
			}
			what = append(what, "leasestore_audit_era has no row, so no change can write its audit record "+
				"(every change fails)")
			fix = append(fix, "INSERT INTO leasestore_audit_era (id, id_offset) VALUES (1, 0) (as "+
				"migrations/postgres/00002_fencing_floor_and_replays.sql creates it), then SELECT "+
				"leasestore_audit_new_era() (it moves the ids past the trail's)")
		case "window":
			what = append(what, committedWindow(detail))
			fix = append(fix, windowFix)
		case "unlogged":
			alter := "ALTER TABLE "
			if table == "leasestore_fencing_seq" {
				alter = "ALTER SEQUENCE "
			}
			if detail == "t" {
				what = append(what, table+" is a temporary table of the pool's connections, which stands in for "+
					"the schema's and ends with the session")
				fix = append(fix, "DROP TABLE pg_temp."+table+" on those connections")
				continue
			}
			held, ok := map[string]string{
				"leasestore_audit":       "the trail, which request ids' retries are answered from",
				"leasestore_leases":      "the leases and each key's last token",
				"leasestore_fencing_seq": "the tokens it issued (it starts again at 1)",
			}[table]
			if !ok {
				held = "its rows"
			}
			what = append(what, table+" is unlogged: a crash empties it and no standby has it, so a crash or "+
				"a failover loses "+held)
			fix = append(fix, alter+table+" SET LOGGED")
		case "trigger":
			triggers = append(triggers, detail+" on "+table)
			fix = append(fix, "DROP TRIGGER "+detail+" ON "+table+" (or ALTER TABLE "+table+" DISABLE TRIGGER "+detail+")")
		case "rule":
			rules = append(rules, detail+" on "+table)
			fix = append(fix, "DROP RULE "+detail+" ON "+table)
		case "privilege":
			// Judged by Health alone (privilegesError): reads serve without them.
		default:
			return inconsistent(op, "settings: unknown kind of object %q", o)
		}
	}
	if len(triggers) > 0 {
		what = append(what, "triggers that are not the store's own fire on its tables ("+strings.Join(triggers, ", ")+
			"), and can change or drop what it writes (one on the trail that returns NULL drops each audit "+
			"record, and every change then fails)")
	}
	if len(rules) > 0 {
		what = append(what, "rules rewrite the store's statements ("+strings.Join(rules, ", ")+"; with an INSERT or "+
			"UPDATE rule every acquire fails)")
	}
	if len(what) == 0 {
		return nil
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, nil, "postgres: %s: run %s",
		strings.Join(what, "; "), strings.Join(fix, "; "))
}

// windowFix is the fix of a committed row of the prune window.
const windowFix = "DELETE FROM leasestore_audit_prune (a prune opens its own window)"

// committedWindow says what a committed row of the prune window, for
// records before cutOff (as windowCutOffSQL gives it; "" when unknown),
// breaks.
func committedWindow(cutOff string) string {
	if t, err := time.Parse(time.RFC3339Nano, cutOff); err == nil {
		cutOff = t.UTC().Format(time.RFC3339Nano)
	}
	window := "the prune window, for records before " + cutOff
	if cutOff == "" {
		window = "the prune window, committed as the prune began"
	}
	return "leasestore_audit_prune holds a committed row (" + window + "), which no " +
		"prune leaves behind (each opens and closes it inside its own transactions), so the trail's append-only " +
		"trigger lets any DELETE of those audit records through, and any role may take or free a prune's request id"
}

// privilegesError is Health's refusal ([forbidden]) of a role that lacks privileges
// the writes need, given among settingsSQL's objects as
// privilege/object/privilege, naming each and the GRANT that gives it
// (privilegeFix's, which a write that met the missing privilege names
// too); nil when it lacks none. Open accepts such a role, as a read-only
// one: reads serve.
func privilegesError(op protocol.Op, objects []string) error {
	var lacks, grants []string
	granted := map[string]bool{}
	for _, o := range objects {
		kind, rest, _ := strings.Cut(o, "/")
		if kind != "privilege" {
			continue
		}
		object, priv, _ := strings.Cut(rest, "/")
		lacks = append(lacks, priv+" on "+object)
		what := "table"
		switch {
		case object == "leasestore_fencing_seq":
			what = "sequence"
		case priv == "EXECUTE":
			what = "function"
		}
		if g := grantFor(what, object); !granted[g] {
			granted[g] = true
			grants = append(grants, "GRANT "+g+" TO it")
		}
	}
	if len(lacks) == 0 {
		return nil
	}
	return forbidden(op, nil,
		"postgres: the DSN's role lacks privileges the writes need (%s), so writes fail: run %s "+
			"(docs/postgres-settings.md#privileges lists what each command needs)",
		strings.Join(lacks, ", "), strings.Join(grants, "; "))
}

// checkSchema reads the connection's schema and its migration version, in
// two statements (this happens once, at open).
func (b *Backend) checkSchema(ctx context.Context) error {
	var (
		schema, unusable *string
		exists           bool
	)
	if err := b.pool.QueryRow(ctx, schemaSQL).Scan(&schema, &exists, &unusable); err != nil {
		return interpretCallError(ctx, "", err)
	}
	if unusable != nil && !exists {
		// The store is not in the schema the connection uses, and the
		// search_path names one before it that the role may not use.
		return unusableSchema("", *unusable)
	}
	if schema == nil {
		return backendkit.NewError("", protocol.StatusUnavailable, nil,
			"postgres: no schema of the connection's search_path exists: run `leasectl migrate up`, "+
				"which creates it (or call migrations.Up)")
	}
	if b.schema == "" {
		b.schema = *schema // at Open or New, before the backend is shared
	}
	where := fmt.Sprintf("postgres schema %q", *schema)
	var version int64
	if exists {
		if err := b.pool.QueryRow(ctx, schemaVersionSQL).Scan(&version); err != nil {
			return interpretCallError(ctx, "", err)
		}
	}
	var oldest int64
	if version > migrations.LatestVersion {
		// A missing table (a schema that predates it) leaves oldest at 0.
		_ = b.pool.QueryRow(ctx, schemaCompatSQL).Scan(&oldest)
	}
	if !sqlstore.ServesSchema(version, oldest, migrations.LatestVersion) {
		return sqlstore.SchemaVersionError(version, migrations.LatestVersion, where)
	}
	return nil
}

// Name returns "postgres".
func (b *Backend) Name() string { return Name }

// Pool returns the backend's pool, owned or borrowed. Callers must not
// close a pool the backend owns. A pool Open made carries the session
// settings it pins on each direct connection (read committed, jit and
// enable_seqscan off, ...; see docs/postgres-settings.md), which a
// caller's own queries on it get too.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// Health returns nil when the server answers within ctx and the settings
// that fencing depends on hold (see [Open]); a fencing sequence left behind
// the issued tokens is repaired on the way.
func (b *Backend) Health(ctx context.Context) error {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if err := b.callRefusal(protocol.OpHealth); err != nil {
		return err
	}
	return b.checkSettings(ctx, protocol.OpHealth)
}

// Close closes the pool when the backend owns it, waiting until every
// connection was returned (pgxpool's Close); a borrowed pool is left open.
// It first closes the connection that listens for released keys, if one
// is open, and waits for the coalesced batches in flight and for the
// freeing of the request id of a prune that stopped early, when that went
// on after the prune answered (at most five seconds; see
// [Backend.PruneAudit]). Every call from the moment Close begins
// (Subscribe included) answers closed, matching [protocol.ErrClosed]:
// nothing is sent, on a borrowed pool too.
//
// Close returns once all that is done. When ctx ends first (or had ended
// already) while Close waits for something in flight (one of the above,
// an operation holding a connection of the owned pool), Close returns at
// once with a timeout error that matches ctx's and says what it was
// waiting for: the Backend stays closed, and closes its pool in the
// background once that wait ends. With nothing in flight there is nothing
// to wait for: Close closes the Backend and returns nil whatever ctx
// says. Close is idempotent: a later call waits, in the same way, for the
// first to finish and returns its error.
func (b *Backend) Close(ctx context.Context) error {
	b.closed.Store(true)
	left, err := b.closer.Close(ctx, b.shut)
	if left == "" {
		return err
	}
	return backendkit.NewError(protocol.OpClose, protocol.StatusTimeout, ctx.Err(),
		"postgres: the context ended while Close waited for %s; every call answers closed from now on, "+
			"and Close finishes in the background once that wait ends (call Close again to wait for it)", left)
}

// The steps of shut that wait for what is in flight, as a Close cut off
// by its context names them.
const (
	stepListener    = "the connection that listens for released keys to close"
	stepBatches     = "the coalesced batches in flight"
	stepPruneClaims = "a prune's freeing of its request id (a statement of its own, at most 5s)"
	stepPool        = "the pool's connections in use (operations in flight) to be returned"
)

// shut is Close's work, in a goroutine of its own (see Backend.closer).
func (b *Backend) shut() error {
	b.closer.Await(stepListener, b.listen.tryClose, b.listen.close)
	if b.co != nil {
		b.closer.Await(stepBatches, b.co.q.TryWait, b.co.wait)
	}
	b.closer.Await(stepPruneClaims, b.drops.TryWait, b.drops.Wait)
	if b.ownsPool {
		b.closer.Await(stepPool, func() bool {
			if b.pool.Stat().AcquiredConns() > 0 {
				return false
			}
			b.pool.Close() // closes the idle connections
			return true
		}, b.pool.Close)
	}
	return nil
}

// callRefusal returns closed, for a call (op) at its start, once Close
// began; nil otherwise.
func (b *Backend) callRefusal(op protocol.Op) error {
	if b.closed.Load() {
		return errClosed(op)
	}
	return nil
}

// errClosed is the answer of a call (op) once Close began.
func errClosed(op protocol.Op) error {
	return backendkit.NewError(op, protocol.StatusClosed, nil, "postgres: the backend was closed")
}

// clock returns the injected time (UTC, truncated to the microsecond as the
// server stores it) or nil, which makes the statements use now().
func (b *Backend) clock() *time.Time {
	if b.now == nil {
		return nil
	}
	t := b.now().UTC().Truncate(time.Microsecond)
	return &t
}

// CheckDSN refuses, as invalid, a postgres:// or postgresql:// URL whose
// '@' signs pgx would not read as its writer meant. pgx reads a URL as
// libpq does: the user and password end at the first '@' before any '/',
// so a password written with an '@' or a '/' as is is cut there, and its
// rest is read as the host, the database name or parameters, which pgx's
// errors name (and a connection would go there). So a URL may hold an '@'
// only as the one that ends the user info, or, when it has none, in a
// parameter's value (?application_name=me@corp); an '@' anywhere else (in
// the user, the password, a host or the database name) is written %40, and
// a '/' in a password %2F. The error names the rule, never the DSN or any
// part of it. Other DSNs (libpq's keyword/value form) pass. [Open] and a
// [Config].ListenDSN apply it; leasectl applies it to every DSN it is given.
func CheckDSN(dsn string) error { return checkDSN(dsn, "dsn") }

func checkDSN(dsn, what string) error {
	rest, ok := strings.CutPrefix(dsn, "postgresql://")
	if !ok {
		if rest, ok = strings.CutPrefix(dsn, "postgres://"); !ok {
			return nil
		}
	}
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		if strings.Contains(rest[i+1:], "@") {
			return dsnAtError(what)
		}
		return nil
	}
	head, query, _ := strings.Cut(rest, "?")
	if strings.Contains(head, "@") {
		return dsnAtError(what)
	}
	for pair := range strings.SplitSeq(query, "&") {
		if name, _, _ := strings.Cut(pair, "="); strings.Contains(name, "@") { // a password's rest, as a parameter
			return dsnAtError(what)
		}
	}
	return nil
}

// dsnAtError is CheckDSN's refusal of what (the DSN, Config.ListenDSN).
func dsnAtError(what string) error {
	return backendkit.NewError("", protocol.StatusInvalid, nil,
		"postgres: %s: an '@' where a URL DSN allows none (pgx ends the user and password at the first '@', "+
			"so the rest of a password would be read as the host, the database or parameters): "+
			"write an '@' in the password, the user or the database name as %%40, and a '/' in the password as %%2F", what)
}

// dsnPassword extracts the password from a DSN that pgx could not parse, so
// that it can be kept out of error messages: the password of a URL, or the
// value of a password keyword (conninfoPassword).
func dsnPassword(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		rest := dsn[i+3:]
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				return pw
			}
		}
		return ""
	}
	return conninfoPassword(dsn)
}

// conninfoPassword returns the password of a keyword/value DSN as written
// (escapes kept, quotes not), reading it as libpq does: blanks may surround
// "=", a value is single-quoted or runs to the next blank, and a backslash
// escapes the character after it; "" when there is none.
func conninfoPassword(dsn string) string {
	skip := func(i int) int {
		for i < len(dsn) && (dsn[i] == ' ' || dsn[i] == '\t' || dsn[i] == '\n' || dsn[i] == '\r' || dsn[i] == '\f' || dsn[i] == '\v') {
			i++
		}
		return i
	}
	blank := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	password := ""
	for i := skip(0); i < len(dsn); i = skip(i) {
		k := i
		for i < len(dsn) && dsn[i] != '=' && !blank(dsn[i]) {
			i++
		}
		key := dsn[k:i]
		if i = skip(i); i >= len(dsn) || dsn[i] != '=' {
			return password // not keyword/value: pgx says so
		}
		i = skip(i + 1)
		quoted := i < len(dsn) && dsn[i] == '\''
		if quoted {
			i++
		}
		v := i
		for i < len(dsn) {
			if dsn[i] == '\\' && i+1 < len(dsn) {
				i += 2
				continue
			}
			if (quoted && dsn[i] == '\'') || (!quoted && blank(dsn[i])) {
				break
			}
			i++
		}
		if key == "password" {
			password = dsn[v:i]
		}
		if quoted && i < len(dsn) {
			i++ // the closing quote
		}
	}
	return password
}

// minRedactedSecret is the shortest password replaced in error text: a
// shorter one would mangle ordinary words ("ab" in "database"), and pgx does
// not print passwords in its errors; the redaction is a safety net.
const minRedactedSecret = 4

// redact replaces every occurrence of secret in s, and of each of its
// blank-separated parts (pgx masks a password up to its first blank, an
// escaped one too, and leaves the rest as written).
func redact(s, secret string) string {
	if len(secret) >= minRedactedSecret {
		s = strings.ReplaceAll(s, secret, "xxxxx")
	}
	if parts := strings.Fields(secret); len(parts) > 1 {
		for _, p := range parts {
			if len(p) >= minRedactedSecret {
				s = strings.ReplaceAll(s, p, "xxxxx")
			}
		}
	}
	return s
}

// redactedError is an error whose text has a secret removed; it unwraps to
// the original error so that errors.Is and errors.As still work.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redacted returns err with secret removed from its text. A *protocol.Error
// keeps its type (its message and cause are redacted) so that its status
// still reads with errors.As.
func redacted(err error, secret string) error {
	if err == nil || redact(err.Error(), secret) == err.Error() {
		return err
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		c := *pe
		c.Message = redact(c.Message, secret)
		if c.Err != nil {
			c.Err = &redactedError{msg: redact(c.Err.Error(), secret), err: c.Err}
		}
		return &c
	}
	return &redactedError{msg: redact(err.Error(), secret), err: err}
}
