package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leasestore/leasestore/migrations"
)

// openSQLite returns a fresh SQLite file in a temporary directory of t,
// closed when the test ends.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sqliteObjects lists the schema objects of the file, except SQLite's own
// and goose's version table, as "type name".
func sqliteObjects(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT type || ' ' || name FROM sqlite_schema
		WHERE name NOT LIKE 'sqlite_%' AND name <> ? ORDER BY type, name`, migrations.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSQLiteUpDownUp(t *testing.T) {
	ctx := testCtx(t)
	db := openSQLite(t)

	res, err := migrations.Up(ctx, migrations.SQLite, db)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if len(res) != migrations.LatestVersion {
		t.Fatalf("up applied %d migrations, want %d", len(res), migrations.LatestVersion)
	}
	// The objects every version has; later ones may add more.
	core := []string{
		"index leasestore_audit_key",
		"index leasestore_leases_live", "index leasestore_leases_owner_live",
		"table leasestore_audit", "table leasestore_fencing", "table leasestore_leases",
		"trigger leasestore_audit_no_delete", "trigger leasestore_audit_no_replace", "trigger leasestore_audit_no_update",
		"trigger leasestore_fencing_no_decrease", "trigger leasestore_fencing_no_delete",
		"trigger leasestore_fencing_no_replace",
	}
	want := sqliteObjects(t, db)
	for _, o := range core {
		if !slices.Contains(want, o) {
			t.Fatalf("after up, objects = %q, want them to include %q", want, o)
		}
	}
	assertStatus(t, ctx, db, true)

	// Up again is a no-op.
	if res, err := migrations.Up(ctx, migrations.SQLite, db); err != nil || len(res) != 0 {
		t.Fatalf("second up: %d migrations, %v; want 0, nil", len(res), err)
	}

	// Version 10 dropped the trail's time index, which no statement reads;
	// its down builds it again.
	if slices.Contains(want, "index leasestore_audit_at") {
		t.Fatalf("after up, objects = %q, want no leasestore_audit_at (version 10 drops it)", want)
	}
	for v := migrations.LatestVersion; v > 0; v-- {
		if _, err := migrations.Down(ctx, migrations.SQLite, db); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
		if got := sqliteObjects(t, db); v == 10 && !slices.Contains(got, "index leasestore_audit_at") {
			t.Fatalf("after down from 10, objects = %q, want leasestore_audit_at back", got)
		}
	}
	if got := sqliteObjects(t, db); len(got) != 0 {
		t.Fatalf("after down, objects left: %q", got)
	}
	assertStatus(t, ctx, db, false)

	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatalf("up after down: %v", err)
	}
	if got := sqliteObjects(t, db); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after up, down, up: objects = %q, want %q", got, want)
	}
	var last int64
	if err := db.QueryRow(`SELECT last_token FROM leasestore_fencing WHERE id = 1`).Scan(&last); err != nil || last != 0 {
		t.Fatalf("fencing counter after up, down, up = %d, %v; want 0", last, err)
	}
}

func assertStatus(t *testing.T, ctx context.Context, db *sql.DB, applied bool) {
	t.Helper()
	st, err := migrations.Status(ctx, migrations.SQLite, db)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if len(st) != migrations.LatestVersion {
		t.Fatalf("status lists %d migrations, want %d", len(st), migrations.LatestVersion)
	}
	for _, s := range st {
		if got := s.State == "applied"; got != applied {
			t.Fatalf("migration %d state %q, want applied=%v", s.Source.Version, s.State, applied)
		}
	}
}

func TestSQLiteUsesOwnVersionTable(t *testing.T) {
	ctx := testCtx(t)
	db := openSQLite(t)
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'goose_db_version'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("goose's default version table exists (%d, %v): leasestore must use %s", n, err, migrations.VersionTable)
	}
	var v int64
	if err := db.QueryRow(`SELECT max(version_id) FROM ` + migrations.VersionTable).Scan(&v); err != nil || v != migrations.LatestVersion {
		t.Fatalf("%s at %d, %v; want %d", migrations.VersionTable, v, err, migrations.LatestVersion)
	}
}

// The audit trail is append-only in the file itself: raw statements that
// would change or remove a record are refused by triggers.
func TestSQLiteAuditAppendOnly(t *testing.T) {
	ctx := testCtx(t)
	db := openSQLite(t)
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	const insert = `INSERT INTO leasestore_audit
		(at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash, expires_at)
		VALUES (1, 'acquire', 'ns', 'k', 'o', 1, ?, 'o', '', 'acquired', 1, 'h', 2)`
	if _, err := db.ExecContext(ctx, insert, "r1"); err != nil {
		t.Fatalf("insert: %v", err)
	}
	refused := []struct{ name, stmt, msg string }{
		{"update", `UPDATE leasestore_audit SET owner = 'mallory'`, "UPDATE refused"},
		{"update one column by id", `UPDATE leasestore_audit SET token = 99 WHERE id = 1`, "UPDATE refused"},
		{"delete", `DELETE FROM leasestore_audit WHERE id = 1`, "DELETE refused"},
		{"delete all", `DELETE FROM leasestore_audit`, "DELETE refused"},
		{"insert or replace by id", `INSERT OR REPLACE INTO leasestore_audit
			(id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash)
			VALUES (1, 1, 'acquire', 'ns', 'k', 'mallory', 1, 'other', 'o', '', 'acquired', 1, 'h')`, "replacing a record refused"},
		{"replace by request id", `REPLACE INTO leasestore_audit
			(at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash)
			VALUES (1, 'acquire', 'ns', 'k', 'mallory', 1, 'r1', 'o', '', 'acquired', 1, 'h')`, "replacing a record refused"},
		{"upsert", `INSERT INTO leasestore_audit
			(at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash)
			VALUES (1, 'acquire', 'ns', 'k', 'mallory', 1, 'r1', 'o', '', 'acquired', 1, 'h')
			ON CONFLICT (namespace, request_id) DO UPDATE SET owner = excluded.owner`, "refused"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.ExecContext(ctx, c.stmt)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("%s: err = %v, want one containing %q", c.stmt, err, c.msg)
			}
		})
	}
	var owner string
	var n int
	if err := db.QueryRow(`SELECT count(*), max(owner) FROM leasestore_audit`).Scan(&n, &owner); err != nil || n != 1 || owner != "o" {
		t.Fatalf("audit after refused statements: %d rows, owner %q, %v; want the one original row", n, owner, err)
	}
	// Appending is still allowed.
	if _, err := db.ExecContext(ctx, insert, "r2"); err != nil {
		t.Fatalf("second insert: %v", err)
	}
}

// The fencing counter may only grow, and its row may not go away.
func TestSQLiteFencingCounterOnlyGrows(t *testing.T) {
	ctx := testCtx(t)
	db := openSQLite(t)
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE leasestore_fencing SET last_token = 10 WHERE id = 1`); err != nil {
		t.Fatalf("raising the counter: %v", err)
	}
	for _, stmt := range []string{
		`UPDATE leasestore_fencing SET last_token = 9 WHERE id = 1`,
		`UPDATE leasestore_fencing SET id = 2`,
		`DELETE FROM leasestore_fencing`,
		`INSERT OR REPLACE INTO leasestore_fencing (id, last_token) VALUES (1, 0)`,
		`INSERT INTO leasestore_fencing (id, last_token) VALUES (2, 0)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil {
			t.Errorf("%s: accepted, want refused", stmt)
		}
	}
	var last int64
	if err := db.QueryRow(`SELECT last_token FROM leasestore_fencing WHERE id = 1`).Scan(&last); err != nil || last != 10 {
		t.Fatalf("counter = %d, %v; want 10", last, err)
	}
}

// Status and Down only read a database that was never migrated: they must
// not create goose's version table (that would be migrating implicitly).
func TestStatusAndDownOfAnUnmigratedDatabaseWriteNothing(t *testing.T) {
	ctx := testCtx(t)
	db := openSQLite(t)
	st, err := migrations.Status(ctx, migrations.SQLite, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != migrations.LatestVersion {
		t.Fatalf("status lists %d migrations, want %d", len(st), migrations.LatestVersion)
	}
	for _, s := range st {
		if s.State != "pending" {
			t.Fatalf("migration %d is %q on a fresh file, want pending", s.Source.Version, s.State)
		}
	}
	if _, err := migrations.Down(ctx, migrations.SQLite, db); !errors.Is(err, migrations.ErrNothingApplied) {
		t.Fatalf("down on a fresh file: %v, want ErrNothingApplied", err)
	}
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("status and down created %d schema objects in an unmigrated file", tables)
	}
	// Once migrated, status reads goose's table as before.
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	assertStatus(t, ctx, db, true)
}

// A dialect this package has no migrations for is refused by every entry
// point, before anything touches the database (a new dialect constant must
// not fall through to another dialect's path).
func TestUnknownDialectRefused(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const mysql = migrations.Dialect("mysql")
	if _, err := migrations.FS(mysql); err == nil || !strings.Contains(err.Error(), "unknown dialect") {
		t.Fatalf("FS: %v", err)
	}
	if _, err := migrations.NewProvider(ctx, mysql, db); err == nil || !strings.Contains(err.Error(), "unknown dialect") {
		t.Fatalf("NewProvider: %v", err)
	}
	if _, err := migrations.Up(ctx, mysql, db); err == nil {
		t.Fatal("Up of an unknown dialect succeeded")
	}
	if _, err := migrations.Down(ctx, mysql, db); err == nil {
		t.Fatal("Down of an unknown dialect succeeded")
	}
	if _, err := migrations.Status(ctx, mysql, db); err == nil {
		t.Fatal("Status of an unknown dialect succeeded")
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the database has %d objects (%v), want none", n, err)
	}
}
