package migrations_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

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
				db := openDB(t, d)
				if _, err := migrations.Up(ctx, d, db); err != nil {
					t.Fatal(err)
				}
				for _, stmt := range stmts {
					if _, err := db.ExecContext(ctx, stmt); err != nil {
						t.Fatalf("%s: %v", stmt, err)
					}
				}
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
