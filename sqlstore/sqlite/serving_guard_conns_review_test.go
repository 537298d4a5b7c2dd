package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestServingGuardRefusalWithMinOpenConnsAndAWaiter: New accepts a *sql.DB
// limited to MinOpenConns (2), one for the poller while anyone waits and
// one for every other statement. But a write refused by a newer schema's
// serving guard is interpreted (schemaRefusal, a read on the *sql.DB)
// while its transaction still holds that one connection: the read waits
// for a third that never comes, until the caller's deadline, and the
// refusal naming both schema versions becomes a bare timeout (the write
// lock held all along).
func TestServingGuardRefusalWithMinOpenConnsAndAWaiter(t *testing.T) {
	path := migratedFile(t)
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(sqlite.MinOpenConns)
	b, err := sqlite.New(ctxT(t), db, nil)
	if err != nil {
		t.Fatalf("New on a *sql.DB limited to MinOpenConns: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	_, cancel, err := b.Subscribe(ctxT(t), key("waited"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()

	raw := rawDB(t, path)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (version_id, is_applied) VALUES (%d, 1)`, migrations.VersionTable, migrations.LatestVersion+1),
		fmt.Sprintf(`UPDATE leasestore_compat SET oldest_serving_version = %d`, migrations.LatestVersion+1),
		`CREATE TRIGGER ` + migrations.ServingGuardPrefix + `_insert BEFORE INSERT ON leasestore_leases WHEN NEW.version < 99
		 BEGIN SELECT RAISE(ABORT, '` + migrations.ServingGuardPrefix + `: this schema serves releases from version 99 on'); END`,
	} {
		if _, err := raw.ExecContext(ctxT(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	start := time.Now()
	_, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("new"), Owner: "o", TTL: time.Minute, RequestID: "new"})
	took := time.Since(start)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Status != protocol.StatusUnavailable || took > time.Second {
		t.Fatalf("acquire refused by a serving guard, on a *sql.DB limited to %d connections with a waiter: "+
			"after %v: %v; want unavailable naming schema version %d at once",
			sqlite.MinOpenConns, took.Round(10*time.Millisecond), err, migrations.LatestVersion+1)
	}
}
