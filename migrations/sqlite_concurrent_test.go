package migrations_test

import (
	"database/sql"
	"path/filepath"
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
func TestSQLiteConcurrentUpOfAFreshFile(t *testing.T) {
	ctx := testCtx(t)
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "fresh.db")
		var dbs [2]*sql.DB
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
		var errs [2]error
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
				t.Fatalf("round %d: migrations.Up of process %d, at the same moment as another's on a fresh file: %v; want both to succeed (one migrating, the other finding it migrated)", round, i+1, err)
			}
		}
	}
}
