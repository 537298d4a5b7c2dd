package migrations_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestSQLiteConcurrentUpOfAFreshFile shows that two library users (two
// *sql.DB, as two processes) calling migrations.Up on one fresh SQLite
// file at the same moment do not both succeed: goose takes no lock on
// SQLite, so both apply migration 1 and the second fails "table
// leasestore_leases already exists". Before createSQLiteVersionTable it
// failed now and then only (goose's creation of the version table
// clashed, and the loser's retry a second later found the migrations
// applied); now neither creation fails (the loser finds the table
// created) and it fails in nearly every round. leasectl hides it by
// retrying its whole open; a library user (examples/scanner) gets it.
// Each migration must also be applied once, by one of them: a migration
// that succeeds on a schema that has it already (the empty version 6) and
// is run by two of them is recorded twice. Four processes, rather than
// two, make a migrator that retried after losing meet another in that
// window often enough to show it.
func TestSQLiteConcurrentUpOfAFreshFile(t *testing.T) {
	ctx := testCtx(t)
	const processes = 4
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "fresh.db")
		var dbs [processes]*sql.DB
		for i := range dbs {
			db, err := sqlite.OpenDB(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			dbs[i] = db
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var errs [processes]error
		for i, db := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = migrations.Up(ctx, migrations.SQLite, db)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: migrations.Up of process %d, at the same moment as others' on a fresh file: %v; want all to succeed (each migration applied by one, the others finding it applied)", round, i+1, err)
			}
		}
		// goose records a version each time it runs a migration.
		var versions, distinct, latest int64
		if err := dbs[0].QueryRowContext(ctx, `SELECT count(*), count(DISTINCT version_id), max(version_id) FROM `+
			migrations.VersionTable+` WHERE version_id > 0`).Scan(&versions, &distinct, &latest); err != nil {
			t.Fatal(err)
		}
		if versions != distinct || latest != migrations.LatestVersion {
			t.Fatalf("round %d: after %d Ups at once the version table records %d migrations, %d distinct, up to %d; want each of 1..%d once", round, processes, versions, distinct, latest, migrations.LatestVersion)
		}
	}
}

// TestSQLiteUpFailureWithoutProgressIsReturned shows that Up on SQLite
// runs again only when another migrator made progress: a failure no one
// else explains (here a table of the first migration that the file holds
// already, not recorded in the version table) is returned as it is.
func TestSQLiteUpFailureWithoutProgressIsReturned(t *testing.T) {
	ctx := testCtx(t)
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "clash.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE leasestore_leases (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	_, err = migrations.Up(ctx, migrations.SQLite, db)
	if err == nil || !strings.Contains(err.Error(), "migrations: up: partial migration error (type:sql,version:1)") ||
		!strings.Contains(err.Error(), "table leasestore_leases already exists") {
		t.Fatalf("Up on a file holding a table of migration 1: %v; want migration 1's error", err)
	}
	if v, err := migrations.DBVersion(ctx, migrations.SQLite, db); err != nil || v != 0 {
		t.Fatalf("version after the failed Up: %d, %v; want 0", v, err)
	}
}
