package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

var dialects = []migrations.Dialect{migrations.SQLite, migrations.Postgres}

// openDB returns a fresh, empty database of dialect d: a SQLite file, or a
// PostgreSQL schema of its own from pgtest.
func openDB(t *testing.T, d migrations.Dialect) *sql.DB {
	t.Helper()
	if d == migrations.SQLite {
		return openSQLite(t)
	}
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// migratedWith returns a fresh database of dialect d, migrated up, with
// stmts run on it.
func migratedWith(t *testing.T, ctx context.Context, d migrations.Dialect, stmts ...string) *sql.DB {
	t.Helper()
	db := openDB(t, d)
	if _, err := migrations.Up(ctx, d, db); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return db
}

// storeData are statements that each leave one kind of data in a migrated
// store, as the backends write it.
var storeData = []struct {
	name string
	stmt map[migrations.Dialect]string
}{
	{"a lease", map[migrations.Dialect]string{
		migrations.SQLite: `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
			VALUES ('ns', 'k', 'o', 1, 1, 1, 2, 1)`,
		migrations.Postgres: `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
			VALUES ('ns', 'k', 'o', 1, now(), now(), now() + interval '1 minute', 1)`,
	}},
	{"an audit record", map[migrations.Dialect]string{
		migrations.SQLite: `INSERT INTO leasestore_audit
			(at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash, expires_at)
			VALUES (1, 'acquire', 'ns', 'k', 'o', 1, 'r1', 'o', '', 'acquired', 1, 'h', 2)`,
		migrations.Postgres: `INSERT INTO leasestore_audit
			(id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash, expires_at)
			VALUES (1, now(), 'acquire', 'ns', 'k', 'o', 1, 'r1', 'o', '', 'acquired', 1, 'h', now())`,
	}},
	{"an issued token", map[migrations.Dialect]string{
		migrations.SQLite:   `UPDATE leasestore_fencing SET last_token = 1 WHERE id = 1`,
		migrations.Postgres: `SELECT nextval('leasestore_fencing_seq')`,
	}},
}

// snapshot describes the store's data and its version table.
func snapshot(t *testing.T, d migrations.Dialect, db *sql.DB) string {
	t.Helper()
	lastToken := `SELECT last_token FROM leasestore_fencing WHERE id = 1`
	if d == migrations.Postgres {
		lastToken = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM leasestore_fencing_seq`
	}
	var leases, records, token, versions, version int64
	err := db.QueryRow(`SELECT (SELECT count(*) FROM leasestore_leases), (SELECT count(*) FROM leasestore_audit), (`+
		lastToken+`), (SELECT count(*) FROM `+migrations.VersionTable+`), (SELECT max(version_id) FROM `+
		migrations.VersionTable+`)`).Scan(&leases, &records, &token, &versions, &version)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return fmt.Sprintf("%d leases, %d audit records, last token %d, %d version rows, version %d",
		leases, records, token, versions, version)
}

// Rolling back the first migration of a store that holds leases, audit
// records or issued tokens is refused without DestroyData, and writes
// nothing; with DestroyData it drops them, and tokens start again at 1.
func TestDownRefusesToDropAStoreWithData(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		cases := map[string][]string{}
		for _, data := range storeData {
			cases[data.name] = []string{data.stmt[d]}
			cases["all of them"] = append(cases["all of them"], data.stmt[d])
		}
		for name, stmts := range cases {
			t.Run(string(d)+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t)
				db := migratedWith(t, ctx, d, stmts...)
				// Later migrations roll back whatever the store holds.
				for v := migrations.LatestVersion; v > 1; v-- {
					if _, err := migrations.Down(ctx, d, db); err != nil {
						t.Fatalf("down from version %d: %v", v, err)
					}
				}

				before := snapshot(t, d, db)
				res, err := migrations.Down(ctx, d, db)
				if !errors.Is(err, migrations.ErrStoreNotEmpty) || res != nil {
					t.Fatalf("down of the first migration of a store holding %s: %v, %v; want ErrStoreNotEmpty", name, res, err)
				}
				for _, s := range []string{"--destroy-data", "migrations.DestroyData", "start again at 1"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal %q does not mention %q", err, s)
					}
				}
				if after := snapshot(t, d, db); after != before {
					t.Fatalf("a refused down changed the store: before %s, after %s", before, after)
				}

				res, err = migrations.Down(ctx, d, db, migrations.DestroyData())
				if err != nil || res == nil || res.Source.Version != 1 {
					t.Fatalf("down with DestroyData: %v, %v; want migration 1 rolled back", res, err)
				}
				if _, err := migrations.Up(ctx, d, db); err != nil {
					t.Fatal(err)
				}
				if got := snapshot(t, d, db); !strings.HasPrefix(got, "0 leases, 0 audit records, last token 0,") {
					t.Fatalf("after down with DestroyData and up: %s, want an empty store whose tokens start again", got)
				}
			})
		}
	}
}

// An empty store (migrated, never used) rolls all the way back without
// DestroyData.
func TestDownOfAnEmptyStore(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			db := openDB(t, d)
			if _, err := migrations.Up(ctx, d, db); err != nil {
				t.Fatal(err)
			}
			for v := migrations.LatestVersion; v > 0; v-- {
				if _, err := migrations.Down(ctx, d, db); err != nil {
					t.Fatalf("down from version %d of an empty store: %v", v, err)
				}
			}
			st, err := migrations.Status(ctx, d, db)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range st {
				if s.State != "pending" {
					t.Fatalf("migration %d is %s after rolling everything back", s.Source.Version, s.State)
				}
			}
		})
	}
}

// lockDelayVersion is the version of the lock-delay migration.
const lockDelayVersion = 4

// downToLockDelays rolls db back to the lock-delay migration, checking that
// the migrations after it roll back while lock-delays are in force (only
// the lock-delay migration's own rollback drops them).
func downToLockDelays(t *testing.T, ctx context.Context, d migrations.Dialect, db *sql.DB) {
	t.Helper()
	for v := migrations.LatestVersion; v > lockDelayVersion; v-- {
		if res, err := migrations.Down(ctx, d, db); err != nil || res == nil {
			t.Fatalf("down from version %d with lock-delays in force: %v, %v", v, res, err)
		}
	}
}

// Rolling back the lock-delay migration while a lease carries a lock-delay
// (held, or ended with its delay running) is refused without DropLockDelays
// and writes nothing: the release before it would let the key be acquired
// at once. A lock-delay that has ended, and a release (which drops it), do
// not stop it.
func TestDownRefusesToDropLockDelaysInForce(t *testing.T) {
	t.Parallel()
	now := time.Now().UnixMicro()
	kept := map[string]map[migrations.Dialect]string{ // and what the refusal says of it
		"a live lease with a lock-delay": {
			migrations.SQLite: fmt.Sprintf(`INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token)
				VALUES ('ns', 'live', 'o', 1, %d, %d, %d, 1, 30000000, 1)`, now, now, now+60_000_000),
			migrations.Postgres: `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token)
				VALUES ('ns', 'live', 'o', 1, now(), now(), now() + interval '1 minute', 1, interval '30 seconds', 1)`,
		},
		"an expired lease within its lock-delay": {
			migrations.SQLite: fmt.Sprintf(`INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token)
				VALUES ('ns', 'expired', 'o', 2, %d, %d, %d, 1, 60000000, 2)`, now-2_000_000, now-2_000_000, now-1_000_000),
			migrations.Postgres: `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token)
				VALUES ('ns', 'expired', 'o', 2, now() - interval '2 seconds', now() - interval '2 seconds', now() - interval '1 second', 1, interval '1 minute', 2)`,
		},
		"a revoked lease within its lock-delay": {
			migrations.SQLite: fmt.Sprintf(`INSERT INTO leasestore_lock_delays (namespace, name, owner, token, acquired_at, renewed_at, ended_at, lock_delay)
				VALUES ('ns', 'revoked', 'o', 3, %d, %d, %d, 60000000)`, now-2_000_000, now-2_000_000, now-1_000_000),
			migrations.Postgres: `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token, ended_token, ended_expiry)
				VALUES ('ns', 'revoked', 'o', 3, now() - interval '2 seconds', now() - interval '2 seconds', now() - interval '1 second', 1, interval '1 minute', -3, 3, now() + interval '1 minute')`,
		},
	}
	free := map[migrations.Dialect][]string{
		migrations.SQLite: {
			fmt.Sprintf(`INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token)
				VALUES ('ns', 'delay-over', 'o', 4, %d, %d, %d, 1, 1000000, 4)`, now-3_000_000, now-3_000_000, now-2_000_000),
			fmt.Sprintf(`INSERT INTO leasestore_lock_delays (namespace, name, owner, token, acquired_at, renewed_at, ended_at, lock_delay)
				VALUES ('ns', 'revoke-delay-over', 'o', 5, %d, %d, %d, 1000000)`, now-3_000_000, now-3_000_000, now-2_000_000),
		},
		migrations.Postgres: {
			`INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token)
				VALUES ('ns', 'delay-over', 'o', 4, now() - interval '3 seconds', now() - interval '3 seconds', now() - interval '2 seconds', 1, interval '1 second', 4)`,
			// released by its holder: ended_token = token, delay_token = token
			`INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, lock_delay, delay_token, ended_token, ended_expiry)
				VALUES ('ns', 'released', 'o', 5, now() - interval '2 seconds', now() - interval '2 seconds', now() - interval '1 second', 1, interval '1 minute', 5, 5, now() + interval '1 minute')`,
		},
	}
	version := func(t *testing.T, ctx context.Context, d migrations.Dialect, db *sql.DB) int64 {
		t.Helper()
		v, err := migrations.DBVersion(ctx, d, db)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, d := range dialects {
		for name, stmt := range kept {
			t.Run(string(d)+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t)
				db := migratedWith(t, ctx, d, append(free[d], stmt[d])...)
				downToLockDelays(t, ctx, d, db)
				res, err := migrations.Down(ctx, d, db)
				if !errors.Is(err, migrations.ErrLockDelaysInForce) || res != nil {
					t.Fatalf("down of the lock-delay migration with %s: %v, %v; want ErrLockDelaysInForce", name, res, err)
				}
				want := "1 ended lease(s)"
				if strings.Contains(name, "live") {
					want = "1 held lease(s)"
				}
				for _, s := range []string{want, "--drop-lock-delays", "migrations.DropLockDelays", "acquired at once"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal %q does not mention %q", err, s)
					}
				}
				if v := version(t, ctx, d, db); v != lockDelayVersion {
					t.Fatalf("a refused down left version %d, want %d", v, lockDelayVersion)
				}
				if res, err := migrations.Down(ctx, d, db, migrations.DropLockDelays()); err != nil || res == nil {
					t.Fatalf("down with DropLockDelays: %v, %v", res, err)
				}
				if v := version(t, ctx, d, db); v != lockDelayVersion-1 {
					t.Fatalf("down with DropLockDelays left version %d, want %d", v, lockDelayVersion-1)
				}
			})
		}
		t.Run(string(d)+"/only ended lock-delays", func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			db := migratedWith(t, ctx, d, free[d]...)
			downToLockDelays(t, ctx, d, db)
			if res, err := migrations.Down(ctx, d, db); err != nil || res == nil {
				t.Fatalf("down with only ended lock-delays: %v, %v", res, err)
			}
		})
	}
}
