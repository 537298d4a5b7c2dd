// Package rawbench is the raw baseline of `leasectl bench --compare-raw`:
// the least a lease store must do per operation, issued straight through
// the driver, in tables of its own, so that the bench can print the store's
// figures beside it from the same run.
//
//   - PostgreSQL: a schema of its own (leasestore_raw_XXXXXXXX, dropped by
//     Close) with a lease table, a fencing sequence and an audit table with
//     its primary key and two plain indexes (key, time). An acquire is one
//     statement: the conditional upsert and the audit insert; a release is
//     the delete and the audit insert. No idempotency look-up, no per-key
//     lock, no tombstones, no audit-id checks.
//   - SQLite: a file of its own beside the store's (removed by Close),
//     opened by sqlite.OpenDB (WAL, synchronous=FULL, immediate
//     transactions), one database/sql transaction per operation: the
//     conditional upsert, the fencing counter, the audit insert.
//
// Only cmd/leasectl and benchmarks use it. A Baseline is safe for concurrent use.
package rawbench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Baseline runs the raw acquire and release of one backend kind.
type Baseline interface {
	// Acquire takes name for owner for ttl when it is free or expired, and
	// returns the token; ok is false when a live lease holds it.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (token int64, ok bool, err error)
	// Release gives up the lease (name, owner, token); ok is false when
	// it is not the live lease.
	Release(ctx context.Context, name, owner string, token int64) (ok bool, err error)
	// Close removes the baseline's tables (or file) and closes its pool.
	Close(ctx context.Context) error
}

// rawNamespace is the namespace of every raw lease and record.
const rawNamespace = "raw"

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Postgres is the PostgreSQL baseline.
type Postgres struct {
	pool   *pgxpool.Pool
	schema string
	app    string
	owned  bool // Close drops the schema
}

var _ Baseline = (*Postgres)(nil)

// pgSchemaSQL creates the baseline's objects in the connection's schema.
const pgSchemaSQL = `
CREATE TABLE raw_leases (
    namespace   text COLLATE "C" NOT NULL,
    name        text COLLATE "C" NOT NULL,
    owner       text COLLATE "C" NOT NULL,
    token       bigint NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE SEQUENCE raw_fencing_seq AS bigint;
CREATE TABLE raw_audit (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    op         text NOT NULL,
    namespace  text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    owner      text COLLATE "C" NOT NULL,
    token      bigint NOT NULL,
    request_id text NOT NULL
);
CREATE INDEX raw_audit_key ON raw_audit (name, namespace, id);
CREATE INDEX raw_audit_at ON raw_audit (at);`

// pgAcquireSQL is the conditional upsert and its audit record.
const pgAcquireSQL = `
WITH up AS (
    INSERT INTO raw_leases AS l (namespace, name, owner, token, acquired_at, expires_at)
    VALUES ($1, $2, $3, nextval('raw_fencing_seq'), now(), now() + $4::interval)
    ON CONFLICT (namespace, name) DO UPDATE
        SET owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
            expires_at = excluded.expires_at
        WHERE l.expires_at <= excluded.acquired_at
    RETURNING l.token
), rec AS (
    INSERT INTO raw_audit (at, op, namespace, name, owner, token, request_id)
    SELECT now(), 'acquire', $1, $2, $3, up.token, $5 FROM up
)
SELECT token FROM up`

// pgReleaseSQL is the delete and its audit record.
const pgReleaseSQL = `
WITH del AS (
    DELETE FROM raw_leases l
    WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3 AND l.token = $4 AND l.expires_at > now()
    RETURNING l.token
), rec AS (
    INSERT INTO raw_audit (at, op, namespace, name, owner, token, request_id)
    SELECT now(), 'release', $1, $2, $3, del.token, $5 FROM del
)
SELECT token FROM del`

// PostgresSQL returns the baseline's PostgreSQL objects and its two
// statements, for tools that run them outside Go (the pgbench scripts of
// docs/benchmarks.md): acquire takes $1 namespace, $2 name, $3 owner, $4
// ttl (an interval) and $5 request id, and returns the token when it took
// the key; release takes $1 to $3 as acquire, $4 token and $5 request id.
func PostgresSQL() (schema, acquire, release string) {
	return pgSchemaSQL, pgAcquireSQL, pgReleaseSQL
}

// OpenPostgres creates a scratch schema in the database dsn names and a
// pool of maxConns connections whose search_path is that schema, with the
// settings postgres.Open pins (read committed, jit off, enable_seqscan off).
func OpenPostgres(ctx context.Context, dsn string, maxConns int32) (*Postgres, error) {
	sfx := suffix()
	schema := "leasestore_raw_" + sfx
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("raw baseline: connect: %w", err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("raw baseline: create schema %s: %w", schema, err)
	}
	p, err := attach(ctx, dsn, schema, maxConns)
	if err == nil {
		p.owned = true
		if _, err = p.pool.Exec(ctx, pgSchemaSQL); err != nil {
			p.pool.Close()
		}
	}
	if err != nil {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		return nil, fmt.Errorf("raw baseline: create tables: %w", err)
	}
	return p, nil
}

// AttachPostgres opens a pool of maxConns connections on the baseline
// schema that an earlier [OpenPostgres] made (its [Postgres.Schema]), for
// benchmarks that keep the tables across pools. Its Close closes the pool
// and leaves the schema to the Postgres that made it.
func AttachPostgres(ctx context.Context, dsn, schema string, maxConns int32) (*Postgres, error) {
	p, err := attach(ctx, dsn, schema, maxConns)
	if err != nil {
		return nil, fmt.Errorf("raw baseline: %w", err)
	}
	return p, nil
}

func attach(ctx context.Context, dsn, schema string, maxConns int32) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	app := "leasectl-raw-" + suffix()
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Postgres{pool: pool, schema: schema, app: app}, nil
}

// AppName is the application_name of the baseline's connections.
func (p *Postgres) AppName() string { return p.app }

// Schema names the scratch schema.
func (p *Postgres) Schema() string { return p.schema }

func pgInterval(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

// Acquire implements [Baseline].
func (p *Postgres) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (int64, bool, error) {
	var token int64
	err := p.pool.QueryRow(ctx, pgAcquireSQL, rawNamespace, name, owner, pgInterval(ttl),
		protocol.RandomRequestID()).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// Release implements [Baseline].
func (p *Postgres) Release(ctx context.Context, name, owner string, token int64) (bool, error) {
	var got int64
	err := p.pool.QueryRow(ctx, pgReleaseSQL, rawNamespace, name, owner, token, protocol.RandomRequestID()).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Close drops the scratch schema (unless the Postgres came from
// [AttachPostgres]) and closes the pool.
func (p *Postgres) Close(ctx context.Context) error {
	var err error
	if p.owned {
		_, err = p.pool.Exec(ctx, "DROP SCHEMA "+p.schema+" CASCADE")
	}
	p.pool.Close()
	return err
}

// SQLite is the SQLite baseline.
type SQLite struct {
	db   *sql.DB
	path string
}

var _ Baseline = (*SQLite)(nil)

const sqliteSchemaSQL = `
CREATE TABLE raw_leases (
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    owner       TEXT NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;
CREATE TABLE raw_fencing (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);
INSERT INTO raw_fencing (id, last) VALUES (1, 0);
CREATE TABLE raw_audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    op         TEXT NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    token      INTEGER NOT NULL,
    request_id TEXT NOT NULL
);
CREATE INDEX raw_audit_key ON raw_audit (name, namespace, id);
CREATE INDEX raw_audit_at ON raw_audit (at);`

const (
	sqliteBumpSQL    = `UPDATE raw_fencing SET last = last + 1 WHERE id = 1 RETURNING last`
	sqliteAcquireSQL = `
INSERT INTO raw_leases AS l (namespace, name, owner, token, acquired_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (namespace, name) DO UPDATE SET owner = excluded.owner, token = excluded.token,
    acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
WHERE l.expires_at <= excluded.acquired_at`
	sqliteReleaseSQL = `DELETE FROM raw_leases WHERE namespace = ?1 AND name = ?2 AND owner = ?3 AND token = ?4 AND expires_at > ?5`
	sqliteAuditSQL   = `INSERT INTO raw_audit (at, op, namespace, name, owner, token, request_id) VALUES (?, ?, ?, ?, ?, ?, ?)`
)

// OpenSQLite creates a scratch SQLite file in dir and opens it with
// sqlite.OpenDB, the settings of the backend's own *sql.DB.
func OpenSQLite(ctx context.Context, dir string) (*SQLite, error) {
	path := filepath.Join(dir, "leasestore-raw-"+suffix()+".db")
	db, err := sqlite.OpenDB(path)
	if err != nil {
		return nil, fmt.Errorf("raw baseline: %w", err)
	}
	s := &SQLite{db: db, path: path}
	if _, err := db.ExecContext(ctx, sqliteSchemaSQL); err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("raw baseline: create tables: %w", err)
	}
	return s, nil
}

// Path names the scratch file.
func (s *SQLite) Path() string { return s.path }

// tx runs body in one immediate transaction and commits it.
func (s *SQLite) tx(ctx context.Context, body func(tx *sql.Tx, now int64) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := body(tx, time.Now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}

var errNoChange = errors.New("no change")

// Acquire implements [Baseline].
func (s *SQLite) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (int64, bool, error) {
	var token int64
	err := s.tx(ctx, func(tx *sql.Tx, now int64) error {
		if err := tx.QueryRowContext(ctx, sqliteBumpSQL).Scan(&token); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, sqliteAcquireSQL, rawNamespace, name, owner, token, now, now+ttl.Microseconds())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errNoChange
		}
		_, err = tx.ExecContext(ctx, sqliteAuditSQL, now, "acquire", rawNamespace, name, owner, token, protocol.RandomRequestID())
		return err
	})
	if errors.Is(err, errNoChange) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// Release implements [Baseline].
func (s *SQLite) Release(ctx context.Context, name, owner string, token int64) (bool, error) {
	err := s.tx(ctx, func(tx *sql.Tx, now int64) error {
		res, err := tx.ExecContext(ctx, sqliteReleaseSQL, rawNamespace, name, owner, token, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errNoChange
		}
		_, err = tx.ExecContext(ctx, sqliteAuditSQL, now, "release", rawNamespace, name, owner, token, protocol.RandomRequestID())
		return err
	})
	if errors.Is(err, errNoChange) {
		return false, nil
	}
	return err == nil, err
}

// Close closes the database and removes the scratch file.
func (s *SQLite) Close(context.Context) error {
	err := s.db.Close()
	for _, p := range []string{s.path, s.path + "-wal", s.path + "-shm"} {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}
