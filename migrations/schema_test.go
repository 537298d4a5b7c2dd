package migrations_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// A DSN whose search_path names a schema that does not exist yet: Status
// reports every migration pending and creates nothing, and Up creates the
// schema and migrates into it (a library user needs no CREATE SCHEMA of
// their own, as leasectl migrate up needs none).
func TestUpCreatesTheSearchPathSchema(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.MissingSchemaDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exists := func() bool {
		var ok bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	st, err := migrations.Status(ctx, migrations.Postgres, db)
	if err != nil {
		t.Fatalf("Status on a schema that does not exist yet: %v", err)
	}
	if len(st) != migrations.LatestVersion {
		t.Fatalf("Status listed %d migrations, want %d", len(st), migrations.LatestVersion)
	}
	for _, m := range st {
		if m.State != goose.StatePending {
			t.Errorf("migration %d is %s, want pending", m.Source.Version, m.State)
		}
	}
	if exists() {
		t.Fatal("Status created the schema")
	}

	if _, err := migrations.Up(ctx, migrations.Postgres, db); err != nil {
		t.Fatalf("Up on a schema that does not exist yet: %v", err)
	}
	if !exists() {
		t.Fatal("Up did not create the schema")
	}
	st, err = migrations.Status(ctx, migrations.Postgres, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st {
		if m.State != goose.StateApplied {
			t.Errorf("after Up, migration %d is %s", m.Source.Version, m.State)
		}
	}
	if created, err := migrations.EnsureSchema(ctx, db); err != nil || created != "" {
		t.Errorf("EnsureSchema on the existing schema = %q, %v; want \"\", nil", created, err)
	}
}
