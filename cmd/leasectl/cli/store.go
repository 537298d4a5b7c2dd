package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers database/sql driver "pgx" for migrations

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// target is a parsed DSN.
type target struct {
	dialect migrations.Dialect
	raw     string // as given: pgx connection string, or the sqlite: form
	path    string // SQLite file path
	shown   string // fit for messages: password masked
}

// parseDSN recognises postgres://, postgresql:// and sqlite:PATH. Any other
// form is invalid input; the message never repeats the DSN, which may hold
// a password in a form leasectl does not know how to mask.
func parseDSN(dsn string) (target, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return target{dialect: migrations.Postgres, raw: dsn, shown: redactDSN(dsn)}, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return target{}, usageError("dsn: sqlite: needs a file path, as in sqlite:leasestore.db")
		}
		return target{dialect: migrations.SQLite, raw: dsn, path: path, shown: dsn}, nil
	case dsn == "":
		return target{}, usageError("dsn: empty")
	}
	return target{}, usageError("dsn: unknown form: want postgres://..., postgresql://... or sqlite:PATH")
}

// dsn returns the DSN in effect: --dsn, else $LEASESTORE_DSN, else DefaultDSN.
func (a *app) dsn() string {
	if a.dsnFlag != "" {
		return a.dsnFlag
	}
	if v := a.getenv(EnvDSN); v != "" {
		return v
	}
	return DefaultDSN
}

// store is an open lease store: a runtime over a backend, its audit reader,
// and what must be closed afterwards.
type store struct {
	rt      *protocol.Runtime
	audit   audit.Reader
	backend string // "postgres" or "sqlite"
	shown   string // the DSN, password masked
	db      *sql.DB
}

// openStore opens the store named by the DSN in effect. A SQLite file is
// created and migrated if needed; PostgreSQL is never migrated here, and an
// unmigrated schema is refused by the backend with an error naming
// 'leasectl migrate up' (status unavailable, exit 5).
func (a *app) openStore(ctx context.Context) (*store, error) {
	t, err := parseDSN(a.dsn())
	if err != nil {
		return nil, err
	}
	return a.openTarget(ctx, t, openOptions{})
}

// openOptions tunes openTarget.
type openOptions struct {
	observer protocol.Observer // on the runtime; nil for none
	maxConns int32             // PostgreSQL pool size unless the DSN sets pool_max_conns; 0 for pgxpool's default
}

// openTarget opens t; see openStore.
func (a *app) openTarget(ctx context.Context, t target, opts openOptions) (*store, error) {
	ctx, cancel := a.opContext(ctx)
	defer cancel()
	a.log.Debug("opening store", "dsn", t.shown)
	cfg := &protocol.Config{DefaultTimeout: a.timeout, Observer: opts.observer}
	switch t.dialect {
	case migrations.Postgres:
		var pcfg postgres.Config
		// Sessions show up as leasectl in pg_stat_activity, unless the DSN
		// names itself.
		if !dsnHasParam(t.raw, "application_name") {
			pcfg.ApplicationName = "leasectl"
		}
		if opts.maxConns > 0 && !dsnHasParam(t.raw, "pool_max_conns") {
			pcfg.MaxConns = opts.maxConns
		}
		b, err := postgres.Open(ctx, t.raw, &pcfg)
		if err != nil {
			return nil, a.storeError(t, err)
		}
		return &store{rt: protocol.New(b, cfg), audit: b, backend: b.Name(), shown: t.shown}, nil
	default:
		db, b, err := a.openSQLite(ctx, t)
		if err != nil {
			return nil, a.storeError(t, err)
		}
		return &store{rt: protocol.New(b, cfg), audit: b, backend: b.Name(), shown: t.shown, db: db}, nil
	}
}

// dsnHasParam reports whether a postgres URL sets the query parameter name.
func dsnHasParam(dsn, name string) bool {
	u, err := url.Parse(dsn)
	return err == nil && u.Query().Has(name)
}

// sqliteAttempts bounds openSQLite's attempts.
const sqliteAttempts = 5

// openSQLite opens, migrates if needed, and wraps the SQLite file of t.
//
// SQLite has no migration lock, and a file that does not exist yet is
// switched to WAL by the first connection: two leasectl processes meeting a
// fresh file at the same moment can collide (SQLITE_BUSY before the busy
// timeout applies, or goose finding the version table created under it).
// The loser retries a few times and then finds the schema in place.
func (a *app) openSQLite(ctx context.Context, t target) (*sql.DB, *sqlite.Backend, error) {
	for attempt := 1; ; attempt++ {
		db, b, retry, err := a.openSQLiteOnce(ctx, t)
		if err == nil {
			return db, b, nil
		}
		if !retry || attempt == sqliteAttempts || ctx.Err() != nil {
			return nil, nil, err
		}
		a.log.Debug("sqlite: opening collided with another process; retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(time.Duration(attempt*attempt) * 10 * time.Millisecond):
		}
	}
}

// openSQLiteOnce is one attempt of openSQLite. retry reports whether the
// failure may be a collision with another process.
func (a *app) openSQLiteOnce(ctx context.Context, t target) (db *sql.DB, b *sqlite.Backend, retry bool, err error) {
	busy := func(err error) bool { return protocol.StatusOf(err) == protocol.StatusTimeout && ctx.Err() == nil }
	db, err = sqlite.OpenDB(t.path)
	if err != nil {
		return nil, nil, busy(err), err
	}
	res, err := migrations.Up(ctx, migrations.SQLite, db)
	if err != nil {
		_ = db.Close()
		return nil, nil, ctx.Err() == nil, fmt.Errorf("store: migrate sqlite: %w", err)
	}
	for _, r := range convertResults(res) {
		a.log.Info("migrated SQLite store", "file", t.path, "version", r.version, "migration", r.source)
	}
	b, err = sqlite.New(ctx, db, nil)
	if err != nil {
		_ = db.Close()
		return nil, nil, busy(err), err
	}
	return db, b, false, nil
}

// storeError wraps an open failure with the (masked) DSN and its status:
// timeout when the deadline passed, the status of a *protocol.Error,
// unavailable otherwise.
func (a *app) storeError(t target, err error) error {
	status := protocol.StatusOf(err)
	return &failure{
		status: string(status),
		err:    fmt.Errorf("store: open %s: %w", t.shown, err),
		msg:    fmt.Sprintf("store: open %s: %s: %s", t.shown, status, describeErr(err)),
	}
}

// gooseResult is one applied or rolled back migration.
type gooseResult struct {
	version  int64
	source   string
	duration time.Duration
}

// close closes the runtime (and so the backend) and any *sql.DB leasectl
// opened for it. It logs instead of failing: the command's outcome is
// already decided.
func (s *store) close(a *app) {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	err := s.rt.Close(ctx)
	if s.db != nil {
		err = errors.Join(err, s.db.Close())
	}
	if err != nil {
		a.log.Warn("closing the store", "err", a.red.redact(err.Error()))
	}
}
