package migrations_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/migrations"
)

// TestSQLiteTriggersAreThoseTheMigrationsLeave: SQLiteTriggers, read from
// the migration files, is exactly what a file migrated up holds in
// sqlite_schema, name for name and text for text (the SQLite backend
// refuses a file that differs from it), and names the file that created
// each last.
func TestSQLiteTriggersAreThoseTheMigrationsLeave(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db := openSQLite(t)
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var held []migrations.Trigger
	for rows.Next() {
		var tr migrations.Trigger
		if err := rows.Scan(&tr.Name, &tr.SQL); err != nil {
			t.Fatal(err)
		}
		held = append(held, tr)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want, err := migrations.SQLiteTriggers()
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != len(want) {
		t.Fatalf("the migrated file holds %d triggers, SQLiteTriggers lists %d:\nheld %+v\nlisted %+v", len(held), len(want), held, want)
	}
	for i, w := range want {
		if held[i].Name != w.Name || held[i].SQL != w.SQL {
			t.Errorf("trigger %d: the file holds %s:\n%s\nSQLiteTriggers lists %s:\n%s", i, held[i].Name, held[i].SQL, w.Name, w.SQL)
		}
	}
	files := map[string]string{
		"leasestore_audit_no_delete":      "migrations/sqlite/00002_fencing_floor_and_replays.sql",
		"leasestore_audit_pruned_through": "migrations/sqlite/00007_prune_horizon.sql",
		"leasestore_audit_no_update":      "migrations/sqlite/00001_leasestore.sql",
	}
	for _, w := range want {
		if f, ok := files[w.Name]; ok && w.File != f {
			t.Errorf("%s: file %q, want %q", w.Name, w.File, f)
		}
		if !strings.HasPrefix(w.SQL, "CREATE TRIGGER "+w.Name+" ") || !strings.HasSuffix(w.SQL, "END") {
			t.Errorf("%s: %q", w.Name, w.SQL)
		}
	}
}
