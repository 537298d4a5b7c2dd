package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// TestASchemaCreatedBeforeTheStoresIsRefusedNamingBoth: after a DBA
// creates a schema before the store's in the DSN's search_path, migrate
// up refuses (matching migrations.ErrStoreInAnotherSchema) naming both
// schemas, and Health answers unavailable naming both, until the schema
// is dropped; then Health answers nil again.
func TestASchemaCreatedBeforeTheStoresIsRefusedNamingBoth(t *testing.T) {
	t.Parallel()
	dsn, store, first, admin := schemaBeforeTheStore(t)

	b := openBackend(t, dsn, nil)
	mustExec(t, admin, "CREATE SCHEMA "+first)
	_, err := migrations.Up(ctxT(t), migrations.Postgres, sqlDB(t, dsn))
	if !errors.Is(err, migrations.ErrStoreInAnotherSchema) || !strings.Contains(err.Error(), store) ||
		!strings.Contains(err.Error(), first) {
		t.Fatalf("migrate up with a new schema before the store's: %v, want a refusal naming %s and %s", err, store, first)
	}
	if n := count(t, admin, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", first); n != 0 {
		t.Errorf("the refused migrate up left %d tables in %s", n, first)
	}
	err = b.Health(ctxT(t))
	wantErrStatus(t, "health with a new schema before the store's", err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), store) || !strings.Contains(err.Error(), first) {
		t.Errorf("health: %v does not name %s and %s", err, store, first)
	}
	mustExec(t, admin, "DROP SCHEMA "+first)
	if err := b.Health(ctxT(t)); err != nil {
		t.Errorf("health after the schema was dropped: %v", err)
	}
}

// schemaBeforeTheStore migrates a store into a fresh schema and returns a
// DSN whose search_path names first (not created yet, dropped at the
// test's end) before it, and a connection of the server's role to play
// the DBA with.
func schemaBeforeTheStore(t *testing.T) (dsn, store, first string, admin *pgx.Conn) {
	t.Helper()
	u, err := url.Parse(pgtest.MigratedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	store = strings.TrimPrefix(q.Get("options"), "-c search_path=")
	first = store + "_first"
	q.Set("options", "-c search_path="+first+","+store)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	admin = rawConn(t, pgtest.ServerDSN(t))
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+first+" CASCADE") })
	return u.String(), store, first, admin
}
