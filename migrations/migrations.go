// Package migrations holds leasestore's database schema as goose migrations,
// embedded in the binary, one folder per dialect, and runs them through
// goose's Provider API with leasestore's own version table
// ([VersionTable]), so a team that already uses goose keeps its own.
//
// Migrations are meant to run at deploy time (leasectl migrate up), not from
// a service at start-up. On PostgreSQL they take a session advisory lock, so
// two deploys migrating the same schema at once are safe. On SQLite, where
// goose takes no lock, [Up] runs again when it failed because another
// process migrated the file meanwhile. Rolling back the
// first migration drops the store: [Down] refuses that on a store holding
// data unless given [DestroyData].
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// VersionTable is goose's version table for leasestore's migrations.
const VersionTable = "leasestore_goose_db_version"

// Dialect selects a folder of migrations.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

//go:embed postgres/*.sql sqlite/*.sql
var embedded embed.FS

// FS returns the migrations of dialect d, for teams that run migrations with
// their own tooling. The files are goose-annotated SQL.
func FS(d Dialect) (fs.FS, error) {
	switch d {
	case Postgres, SQLite:
		return fs.Sub(embedded, string(d))
	}
	return nil, unknownDialect(d)
}

// NewProvider returns a goose Provider for dialect d over db, using
// [VersionTable]. On PostgreSQL it takes a session advisory lock whose id is
// derived from the connection's current schema, so concurrent migrations of
// one schema run one after the other while different schemas do not wait on
// each other. On SQLite, where goose takes no lock, its version table
// refuses to record a version twice, so a migration that another process
// applied meanwhile fails and is rolled back rather than applied again.
//
// The caller owns db. Do not call the Provider's Close: goose's Close closes
// db. Providers are not meant to be shared between goroutines.
func NewProvider(ctx context.Context, d Dialect, db *sql.DB) (*goose.Provider, error) {
	return newProvider(ctx, d, db, true)
}

// newProvider is [NewProvider], with PostgreSQL's session locker only when
// locked is set.
func newProvider(ctx context.Context, d Dialect, db *sql.DB, locked bool) (*goose.Provider, error) {
	fsys, err := FS(d)
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	var gooseDialect goose.Dialect
	switch d {
	case SQLite:
		store, err := newSQLiteStore()
		if err != nil {
			return nil, err
		}
		gooseDialect = goose.DialectCustom // the store's: SQLite
		opts = append(opts, goose.WithStore(store))
	case Postgres:
		gooseDialect = goose.DialectPostgres
		opts = append(opts, goose.WithTableName(VersionTable))
		if !locked {
			break
		}
		locker, err := postgresLocker(ctx, db)
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	default:
		return nil, unknownDialect(d)
	}
	p, err := goose.NewProvider(gooseDialect, db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// postgresLocker returns the session locker of the connection's current
// schema (see NewProvider).
func postgresLocker(ctx context.Context, db *sql.DB) (lock.SessionLocker, error) {
	var schema sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("migrations: read current schema: %w", err)
	}
	if !schema.Valid {
		return nil, fmt.Errorf("migrations: the connection has no current schema: check search_path")
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(schemaLockID(schema.String)),
		lock.WithLockTimeout(1, 300), // poll every second for up to 5 minutes
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return locker, nil
}

// unknownDialect is the error for a dialect this package has no migrations for.
func unknownDialect(d Dialect) error {
	return fmt.Errorf("migrations: unknown dialect %q (want %q or %q)", d, Postgres, SQLite)
}

// schemaLockID maps a schema name to an advisory lock id in a range of its
// own: FNV-1a of "leasestore:" + schema.
func schemaLockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("leasestore:" + schema))
	return int64(h.Sum64() >> 1)
}

// Up applies every pending migration of dialect d to db. On PostgreSQL it
// first creates the schema the connection's search_path names when none of
// its schemas exists yet (see [EnsureSchema]), and refuses, matching
// [ErrStoreInAnotherSchema], when another schema of the search_path than
// the one it would migrate (the current schema) already holds a store. On SQLite, two Ups of one
// file at once both succeed: one that fails because the other applied a
// migration meanwhile runs again and finds it applied.
func Up(ctx context.Context, d Dialect, db *sql.DB) ([]*goose.MigrationResult, error) {
	if d == Postgres {
		if _, err := EnsureSchema(ctx, db); err != nil {
			return nil, err
		}
		if err := refuseStoreElsewhere(ctx, db); err != nil {
			return nil, err
		}
	}
	if d == SQLite {
		return upSQLite(ctx, db)
	}
	p, err := NewProvider(ctx, d, db)
	if err != nil {
		return nil, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return res, fmt.Errorf("migrations: up: %w", err)
	}
	return res, nil
}

// upSQLite is [Up] on SQLite, where goose takes no migration lock: two
// processes migrating one file at once both read the same pending
// migrations and both run the first of them, each in its own transaction;
// the second to take the file's write lock finds the migration applied and
// fails ("table ... already exists", or the version recorded already: see
// sqliteStore), rolling its transaction back. So when
// goose's Up fails and the file's version has moved past what this call
// applied (another migrator applied a migration meanwhile), upSQLite runs
// Up again, which finds that migration applied and goes on with the rest
// (or finds nothing left to do). A failure while no one made progress (a
// full disk, an error in a migration) is returned at once. The retries are
// bounded: each needs the version to have risen, and it cannot rise past
// the last migration.
func upSQLite(ctx context.Context, db *sql.DB) ([]*goose.MigrationResult, error) {
	var applied []*goose.MigrationResult
	for {
		if err := createSQLiteVersionTable(ctx, db); err != nil {
			return applied, fmt.Errorf("migrations: up: %w", err)
		}
		before, err := DBVersion(ctx, SQLite, db)
		if err != nil {
			return applied, err
		}
		p, err := NewProvider(ctx, SQLite, db)
		if err != nil {
			return applied, err
		}
		res, err := p.Up(ctx)
		applied = append(applied, res...)
		if err == nil {
			return applied, nil
		}
		reached := before
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			applied = append(applied, partial.Applied...)
			for _, r := range partial.Applied {
				reached = max(reached, r.Source.Version)
			}
		}
		if ctx.Err() == nil {
			// Another migrator's progress is what makes a retry worth it.
			if now, verr := DBVersion(ctx, SQLite, db); verr == nil && now > reached {
				continue
			}
		}
		return applied, fmt.Errorf("migrations: up: %w", err)
	}
}

// sqliteVersionRecorded tells whether [VersionTable] records version ?1.
const sqliteVersionRecorded = `SELECT EXISTS (SELECT 1 FROM ` + VersionTable + ` WHERE version_id = ?1)`

// sqliteStore is goose's SQLite store of [VersionTable], except that it
// refuses to record a version that is recorded already. goose records a
// migration in the transaction that runs it, so the refusal rolls the
// migration back: one that another process applied after goose read the
// versions, and that succeeds again on a schema that has it (as the empty
// version 6), is not applied twice, and [Up] runs again (see upSQLite).
type sqliteStore struct{ database.StoreExtender }

// newSQLiteStore returns the [sqliteStore] of [VersionTable].
func newSQLiteStore() (sqliteStore, error) {
	store, err := database.NewStore(database.DialectSQLite3, VersionTable)
	if err != nil {
		return sqliteStore{}, fmt.Errorf("migrations: %w", err)
	}
	ext, ok := store.(database.StoreExtender)
	if !ok {
		return sqliteStore{}, fmt.Errorf("migrations: goose's SQLite store %T has no TableExists", store)
	}
	return sqliteStore{ext}, nil
}

// Insert records req's version unless it is recorded already.
func (s sqliteStore) Insert(ctx context.Context, db database.DBTxConn, req database.InsertRequest) error {
	var recorded bool
	if err := db.QueryRowContext(ctx, sqliteVersionRecorded, req.Version).Scan(&recorded); err != nil {
		return fmt.Errorf("look for version %d in %s: %w", req.Version, VersionTable, err)
	}
	if recorded {
		return fmt.Errorf("version %d is recorded already: another process applied it meanwhile", req.Version)
	}
	return s.StoreExtender.Insert(ctx, db, req)
}

// createSQLiteVersionTable creates the version table of a SQLite file that
// has none, with goose's own statements, as goose's Up would, but without
// goose's retries: goose tries again for three seconds whatever the error,
// in case another process is creating the table at the same time, so a
// failure that is no such clash (a full disk) waits out a shorter deadline,
// whose error then hides the cause. A creation that fails while another
// process created the table meanwhile is no error.
func createSQLiteVersionTable(ctx context.Context, db *sql.DB) error {
	if ok, err := versionTableExists(ctx, SQLite, db); err != nil || ok {
		return err
	}
	store, err := newSQLiteStore()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		if err = store.CreateVersionTable(ctx, tx); err == nil {
			err = store.Insert(ctx, tx, database.InsertRequest{Version: 0})
		}
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		if ok, _ := versionTableExists(ctx, SQLite, db); ok {
			return nil
		}
		return fmt.Errorf("create version table: %w", err)
	}
	return nil
}

// ErrNothingApplied is returned by [Down] when no migration of leasestore
// was ever applied to the database.
var ErrNothingApplied = errors.New("migrations: no leasestore migration is applied: nothing to roll back")

// ErrStoreNotEmpty is matched by the error of [Down] when it refuses to roll
// back the first migration of a store that holds data. Nothing was written.
var ErrStoreNotEmpty = errors.New("migrations: the store holds data")

// ErrLockDelaysInForce is matched by the error of [Down] when it refuses to
// roll back the lock-delay migration (version 4) while a lease carries a
// lock-delay (one that ended and keeps its key, or a held one that would
// keep it once it ends): the release before it ignores lock-delays and
// would let such a key be acquired at once. Nothing was written.
var ErrLockDelaysInForce = errors.New("migrations: lock-delays are in force")

// ErrNewerSchema is matched by the error of [Down] when the database is at
// a version newer than [LatestVersion] (a newer release migrated it): only
// that release's migrations can roll it back. Nothing was written.
var ErrNewerSchema = errors.New("migrations: the schema is newer than this release knows")

// DownOption changes what [Down] may do.
type DownOption func(*downConfig)

type downConfig struct{ destroyData, dropLockDelays bool }

// DestroyData lets [Down] roll back the first migration of a store that holds
// data. That drops every lease, the whole audit trail and the fencing
// counter: tokens start again at 1, so resources that saw higher tokens
// refuse every new holder. It also lets Down roll back the lock-delay
// migration while lock-delays are in force, which drops them.
func DestroyData() DownOption { return func(c *downConfig) { c.destroyData = true } }

// DropLockDelays lets [Down] roll back the lock-delay migration (version 4)
// while leases carry lock-delays, which drops them: keys they keep can be
// acquired at once, and held leases lose theirs. It destroys nothing else.
func DropLockDelays() DownOption { return func(c *downConfig) { c.dropLockDelays = true } }

// Down rolls back the most recent migration of dialect d. It returns
// [ErrNothingApplied], and writes nothing, when the database has no
// leasestore version table.
//
// Rolling back the first migration drops the store. Down refuses that, with
// an error matching [ErrStoreNotEmpty] and without writing anything, when the
// store holds leases or audit records or has issued a fencing token, unless
// [DestroyData] is given. Rolling back the lock-delay migration (version 4)
// is refused the same way, with an error matching [ErrLockDelaysInForce],
// while a lease carries a lock-delay, unless [DropLockDelays] (or
// DestroyData) is given. The check and the rollback are two steps: stop the
// services that use the store first.
func Down(ctx context.Context, d Dialect, db *sql.DB, opts ...DownOption) (*goose.MigrationResult, error) {
	var cfg downConfig
	for _, o := range opts {
		o(&cfg)
	}
	p, err := NewProvider(ctx, d, db)
	if err != nil {
		return nil, err
	}
	if ok, err := versionTableExists(ctx, d, db); err != nil {
		return nil, err
	} else if !ok {
		return nil, ErrNothingApplied
	}
	if v, err := DBVersion(ctx, d, db); err != nil {
		return nil, err
	} else if v > LatestVersion {
		return nil, fmt.Errorf("%w: it is at version %d, this release knows up to %d: roll it back with the release "+
			"that applied version %d (its leasectl migrate down)", ErrNewerSchema, v, LatestVersion, v)
	}
	if !cfg.destroyData {
		if err := refuseToDropData(ctx, d, db, p); err != nil {
			return nil, err
		}
		if !cfg.dropLockDelays {
			if err := refuseToDropLockDelays(ctx, d, db, p); err != nil {
				return nil, err
			}
		}
	}
	res, err := p.Down(ctx)
	if err != nil {
		return res, fmt.Errorf("migrations: down: %w", err)
	}
	return res, nil
}

// storeDataQuery reads, per dialect, what rolling back the first migration
// would destroy: the rows of leasestore_leases and leasestore_audit (each
// counted up to dataCountLimit, so a long audit trail is not scanned) and
// the last fencing token issued (0 for none).
var storeDataQuery = map[Dialect]string{
	SQLite: `SELECT
		(SELECT count(*) FROM (SELECT 1 FROM leasestore_leases LIMIT 1000)),
		(SELECT count(*) FROM (SELECT 1 FROM leasestore_audit LIMIT 1000)),
		(SELECT coalesce(max(last_token), 0) FROM leasestore_fencing)`,
	Postgres: `SELECT
		(SELECT count(*) FROM (SELECT 1 FROM leasestore_leases LIMIT 1000) AS l),
		(SELECT count(*) FROM (SELECT 1 FROM leasestore_audit LIMIT 1000) AS a),
		(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM leasestore_fencing_seq)`,
}

// dataCountLimit is the LIMIT of the counts in storeDataQuery.
const dataCountLimit = 1000

// refuseToDropData returns an error matching [ErrStoreNotEmpty] when the
// next rollback is that of the first migration and the store holds data.
func refuseToDropData(ctx context.Context, d Dialect, db *sql.DB, p *goose.Provider) error {
	sources := p.ListSources()
	if len(sources) == 0 {
		return nil
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrations: down: read the schema version: %w", err)
	}
	if current != sources[0].Version {
		return nil
	}
	q, ok := storeDataQuery[d]
	if !ok {
		return fmt.Errorf("migrations: unknown dialect %q (want %q or %q)", d, Postgres, SQLite)
	}
	var leases, records, lastToken int64
	if err := db.QueryRowContext(ctx, q).Scan(&leases, &records, &lastToken); err != nil {
		return fmt.Errorf("migrations: down: look for data before dropping the store: %w", err)
	}
	if leases == 0 && records == 0 && lastToken == 0 {
		return nil
	}
	return &storeNotEmptyError{version: current, leases: leases, records: records, lastToken: lastToken}
}

// storeNotEmptyError is the refusal of [Down]; it matches [ErrStoreNotEmpty].
type storeNotEmptyError struct {
	version                    int64
	leases, records, lastToken int64
}

func (e *storeNotEmptyError) Error() string {
	count := func(n int64, what string) string {
		switch {
		case n >= dataCountLimit:
			return fmt.Sprintf("%d or more %ss", n, what)
		case n == 1:
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	var data []string
	if e.leases > 0 {
		data = append(data, count(e.leases, "lease row"))
	}
	if e.records > 0 {
		data = append(data, count(e.records, "audit record"))
	}
	if e.lastToken > 0 {
		data = append(data, fmt.Sprintf("the fencing counter at %d", e.lastToken))
	}
	list := strings.Join(data, ", ")
	if n := len(data); n > 1 {
		list = strings.Join(data[:n-1], ", ") + " and " + data[n-1]
	}
	return fmt.Sprintf("migrations: down: refused to roll back migration %d: it drops %s, and tokens would start "+
		"again at 1, so resources that saw higher tokens would refuse every new holder; "+
		"pass --destroy-data to leasectl migrate down (migrations.DestroyData in Go) to destroy them anyway",
		e.version, list)
}

func (e *storeNotEmptyError) Is(target error) bool { return target == ErrStoreNotEmpty }

// lockDelayVersion is the migration that added lock-delays.
const lockDelayVersion = 4

// lockDelaysQuery reads, per dialect, the leases that carry a lock-delay
// now (as the backends judge them; SQLite's ?1 is now in Unix
// microseconds): held ones (their delay starts when they end) and ended
// ones whose delay still keeps the key, how many of each, and when the
// last of each delay ends (Unix microseconds; a held lease's if it is not
// renewed).
var lockDelaysQuery = map[Dialect]string{
	SQLite: `SELECT count(*) FILTER (WHERE held), coalesce(max(ends) FILTER (WHERE held), 0),
		count(*) FILTER (WHERE NOT held), coalesce(max(ends) FILTER (WHERE NOT held), 0) FROM (
		SELECT expires_at > ?1 AS held, expires_at + lock_delay AS ends FROM leasestore_leases
		WHERE delay_token = token AND lock_delay > 0 AND expires_at + lock_delay > ?1
		UNION ALL
		SELECT 0, ended_at + lock_delay FROM leasestore_lock_delays WHERE ended_at + lock_delay > ?1)`,
	Postgres: `SELECT count(*) FILTER (WHERE held), coalesce(max(ends) FILTER (WHERE held), 0),
		count(*) FILTER (WHERE NOT held), coalesce(max(ends) FILTER (WHERE NOT held), 0) FROM (
		SELECT l.ended_token IS DISTINCT FROM l.token AND l.expires_at > now() AS held,
		       (extract(epoch FROM d.ends) * 1000000)::bigint AS ends
		FROM leasestore_leases l CROSS JOIN LATERAL (SELECT ` + PostgresDelayEnds("l") + ` AS ends) AS d
		WHERE l.lock_delay > interval '0' AND d.ends > now()) AS d`,
}

// PostgresDelayEnds is the SQL expression, over the row a of
// leasestore_leases in a PostgreSQL schema of migration 4 or later, of
// when the lock-delay that keeps the row's key from acquires ends: that of
// a lease that ran out (delay_token = token, the lease not ended by its
// holder) or of a revoke's tombstone (delay_token = -token, ended_token =
// token); NULL when none keeps it, as after a release. It is what migration
// 4's columns mean, written once for the PostgreSQL backend's statements
// and for [Down]'s check of lock-delays in force.
func PostgresDelayEnds(a string) string {
	return `CASE WHEN (` + a + `.ended_token IS DISTINCT FROM ` + a + `.token AND ` + a + `.delay_token = ` + a + `.token)
              OR (` + a + `.ended_token = ` + a + `.token AND ` + a + `.delay_token = -` + a + `.token)
         THEN ` + a + `.expires_at + ` + a + `.lock_delay END`
}

// refuseToDropLockDelays returns an error matching [ErrLockDelaysInForce]
// when the next rollback is the lock-delay migration's and a lock-delay
// keeps a key.
func refuseToDropLockDelays(ctx context.Context, d Dialect, db *sql.DB, p *goose.Provider) error {
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrations: down: read the schema version: %w", err)
	}
	if current != lockDelayVersion {
		return nil
	}
	var args []any
	if d == SQLite {
		args = append(args, time.Now().UnixMicro())
	}
	var e lockDelaysError
	if err := db.QueryRowContext(ctx, lockDelaysQuery[d], args...).Scan(&e.held, &e.heldEnd, &e.ended, &e.endedEnd); err != nil {
		return fmt.Errorf("migrations: down: look for lock-delays in force: %w", err)
	}
	if e.held == 0 && e.ended == 0 {
		return nil
	}
	return &e
}

// lockDelaysError is the refusal of [Down] that matches [ErrLockDelaysInForce]:
// held leases with a lock-delay and ended ones whose delay keeps their key,
// each with when the last delay ends (Unix microseconds).
type lockDelaysError struct{ held, heldEnd, ended, endedEnd int64 }

func (e *lockDelaysError) Error() string {
	at := func(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339) }
	var parts []string
	if e.ended > 0 {
		parts = append(parts, fmt.Sprintf("the lock-delays of %d ended lease(s) keep their keys until %s at the latest",
			e.ended, at(e.endedEnd)))
	}
	if e.held > 0 {
		parts = append(parts, fmt.Sprintf("%d held lease(s) carry a lock-delay that starts when they end (stop their "+
			"holders: unless renewed, the last delay ends at %s)", e.held, at(e.heldEnd)))
	}
	return fmt.Sprintf("migrations: down: refused to roll back migration %d: %s; the release before it ignores "+
		"lock-delays and would let those keys be acquired at once: roll back after that, or pass --drop-lock-delays "+
		"to leasectl migrate down (migrations.DropLockDelays in Go) to drop them", lockDelayVersion, strings.Join(parts, "; "))
}

func (e *lockDelaysError) Is(target error) bool { return target == ErrLockDelaysInForce }

// Status reports every migration of dialect d and whether it is applied.
// It only reads, and does not wait for a migration in progress (it takes
// no migration lock): on a database that was never migrated it reports
// every migration pending without creating goose's version table.
func Status(ctx context.Context, d Dialect, db *sql.DB) ([]*goose.MigrationStatus, error) {
	if ok, err := versionTableExists(ctx, d, db); err != nil {
		return nil, err
	} else if !ok {
		// Never migrated (on PostgreSQL perhaps not even the schema
		// exists): a provider without the migration lock lists the sources.
		p, err := newProvider(ctx, d, db, false)
		if err != nil {
			return nil, err
		}
		var st []*goose.MigrationStatus
		for _, src := range p.ListSources() {
			st = append(st, &goose.MigrationStatus{Source: src, State: goose.StatePending})
		}
		return st, nil
	}
	// No migration lock: status only reads, and must not wait for a deploy
	// that is migrating (goose's Status takes the lock when one is set).
	p, err := newProvider(ctx, d, db, false)
	if err != nil {
		return nil, err
	}
	st, err := p.Status(ctx)
	if err != nil {
		return st, fmt.Errorf("migrations: status: %w", err)
	}
	return st, nil
}

// DBVersion returns the highest migration version applied to db, 0 when
// none was (or [VersionTable] does not exist). Unlike [Status], which lists
// the migrations of this release, it also reports a version newer than
// [LatestVersion], applied by a newer release.
func DBVersion(ctx context.Context, d Dialect, db *sql.DB) (int64, error) {
	if ok, err := versionTableExists(ctx, d, db); err != nil || !ok {
		return 0, err
	}
	var v int64
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(version_id), 0) FROM "+VersionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrations: read the schema version: %w", err)
	}
	return v, nil
}

// versionTableExists reports whether [VersionTable] exists where goose
// would look for it: the connection's current schema on PostgreSQL (none
// when the search_path names no existing schema), the main database on
// SQLite.
func versionTableExists(ctx context.Context, d Dialect, db *sql.DB) (bool, error) {
	var q string
	switch d {
	case SQLite:
		q = `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?)`
	case Postgres:
		q = `SELECT EXISTS (SELECT FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = $1)`
	default:
		return false, unknownDialect(d)
	}
	var ok bool
	if err := db.QueryRowContext(ctx, q, VersionTable).Scan(&ok); err != nil {
		return false, fmt.Errorf("migrations: look for %s: %w", VersionTable, err)
	}
	return ok, nil
}

// ServingGuardPrefix begins the name of the guard that a migration adds
// when it raises leasestore_compat's oldest_serving_version, that is when
// the releases before some version can no longer serve the schema. Health
// and Open refuse such a schema, but a release already serving does not
// read the version before each write: the guard makes its writes fail. On
// PostgreSQL it is a CHECK constraint named leasestore_serving_... (added
// NOT VALID, so the existing rows are not read) that the older releases'
// rows fail, on the format versions they write (leases.version,
// audit.version); on SQLite a trigger that raises an error whose message
// begins with the prefix. A backend that meets the guard answers
// unavailable, naming the schema's version and the upgrade, and writes
// nothing (TestServingGuardRefusesARunningOlderRelease in each SQL
// backend).
const ServingGuardPrefix = "leasestore_serving"

// LatestVersion is the version of the newest embedded migration, the same
// for every dialect. A backend checks the database is at this version.
const LatestVersion = 12
