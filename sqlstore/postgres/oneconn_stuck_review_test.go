package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestStuckKeyDelaysNoOtherKeyOnOneConnection: a user caps the pool at
// one connection (pool_max_conns=1 in the DSN, or Config.MaxConns 1: a
// small service, a database with few connections to spare). A DBA's
// session keeps one key's row locked; its renew waits for the lock on the
// pool's only connection until its own deadline, and an acquire of
// another, free key answers timeout ("waited in the coalescing queue ...
// it was not sent"). DESIGN.md contract v3: a member waiting on its key
// delays no member on another key (TestStuckKeyDelaysNoOtherKey shows it
// for the default pool only). Either the wait for a key must not hold the
// connection, or Open must refuse a pool too small to keep that promise.
func TestStuckKeyDelaysNoOtherKeyOnOneConnection(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	b, err := postgres.Open(ctxT(t), dsn, &postgres.Config{ApplicationName: app, MaxConns: 1})
	if err != nil {
		if !strings.Contains(err.Error(), "MaxConns") && !strings.Contains(err.Error(), "pool_max_conns") {
			t.Fatalf("open: %v (a refusal must name the pool size)", err)
		}
		return // refused at Open, naming the pool size: a fix
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	held, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("stuck"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire stuck", held, err, protocol.StatusAcquired)
	tx := lockRow(t, dsn, "stuck")
	stuckDone := make(chan struct{})
	go func() {
		defer close(stuckDone)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = b.Renew(ctx, protocol.RenewRequest{Key: key("stuck"), Owner: "o", Token: held.Lease.Token,
			TTL: time.Minute, RequestID: "n"})
	}()
	t.Cleanup(func() { _ = tx.Rollback(context.Background()); <-stuckDone })
	blockedPID(t, app)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("free"), Owner: "o", TTL: time.Minute, RequestID: "f"})
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("acquire of a free key while another key's row is locked: %s after %v, %v",
			res.Status, time.Since(start).Round(time.Millisecond), err)
	}
}
