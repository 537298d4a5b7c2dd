package migrations_test

import (
	"context"
	"database/sql"
	"hash/fnv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// Status only reads: it does not wait for the migration lock that a deploy
// migrating the schema holds (migration 3 builds indexes for as long as
// the leases table takes). It took the lock, so `leasectl migrate status`,
// and the report that ends `migrate up`, waited for the deploy and then
// failed with "failed to initialize: context deadline exceeded".
func TestStatusDoesNotWaitForTheMigrationLock(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	// The lock of the schema's migrations, as NewProvider derives it:
	// FNV-1a of "leasestore:" + schema, shifted into int64's range.
	h := fnv.New64a()
	h.Write([]byte("leasestore:" + schema))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(h.Sum64()>>1)); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	defer scancel()
	st, err := migrations.Status(sctx, migrations.Postgres, db)
	if err != nil {
		t.Fatalf("status while a deploy holds the migration lock: %v", err)
	}
	if len(st) != migrations.LatestVersion {
		t.Fatalf("status: %d migrations, want %d", len(st), migrations.LatestVersion)
	}
	for _, s := range st {
		if s.State != goose.StateApplied {
			t.Fatalf("status: %+v, want every migration applied", s)
		}
	}
	// The lock is the one migrations take: migrate up waits for it.
	uctx, ucancel := context.WithTimeout(ctx, time.Second)
	defer ucancel()
	if _, err := migrations.Down(uctx, migrations.Postgres, db); err == nil {
		t.Fatal("migrate down went ahead while the test held the migration lock: the test's lock id is not the migrations'")
	}
}
