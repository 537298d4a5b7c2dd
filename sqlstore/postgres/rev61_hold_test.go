package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// getSpy is a Store (and, through the embedded runtime, a Notifier) that
// tells each Get that returned: the confirming reads of WatchLease.
type getSpy struct {
	*protocol.Runtime
	gets chan struct{}
}

func (s getSpy) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	res, err := s.Runtime.Get(ctx, req)
	select {
	case s.gets <- struct{}{}:
	default:
	}
	return res, err
}

// rev61: a holder hears a revoke at once (docs/holding.md) also when the
// revoke commits while its listener connection is being re-established:
// the break signal's get finds the lease still held, the revoke commits
// before the key's wait lock is taken again (so it sends no NOTIFY), and
// nothing signals the holder once the lock is back. It hears of it only at
// its next renewal, 20 s later.
func TestRev61HoldHearsRevokeDuringListenerReconnect(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	holderB := openBackend(t, dsn, &postgres.Config{ApplicationName: app})
	other := protocol.New(openBackend(t, dsn, nil), nil)
	raw := rawPool(t, dsn)
	rt := protocol.New(holderB, nil)
	spy := getSpy{Runtime: rt, gets: make(chan struct{}, 1)}
	k := keysIn(pgtest.Namespace())("job")
	h, err := protocol.Hold(ctxT(t), spy, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(context.Background()); <-h.Done() }()
	select { // the first confirming get, once the subscription is live
	case <-spy.gets:
	case <-time.After(opTimeout):
		t.Fatal("no get after the subscription")
	}
	pids := listenerPIDs(t, raw, app)
	if len(pids) != 1 {
		t.Fatalf("%d listener sessions hold the key's wait lock, want 1", len(pids))
	}
	mustExec(t, raw, `SELECT pg_terminate_backend($1)`, pids[0])
	select { // the get after the break's signal: still held
	case <-spy.gets:
	case <-time.After(opTimeout):
		t.Fatal("no get after the listener connection died")
	}
	revoked := time.Now()
	if _, err := other.Revoke(ctxT(t), protocol.RevokeRequest{Key: k, Actor: "op", Reason: "rev61"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
		t.Logf("heard after %v: %v", time.Since(revoked), context.Cause(h.Context()))
	case <-time.After(5 * time.Second):
		t.Fatalf("revoke committed %v ago, during the listener's reconnection: the holder has not heard of it (renewals every 20s)",
			time.Since(revoked).Round(time.Millisecond))
	}
}
