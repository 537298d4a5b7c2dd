package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestWaiterWokenByAReleaseThatAPruneRemovedBeforeThePollerLooked: the
// poller that wakes a Backend's waiters for another connection's releases
// reads the release and revoke records written since its last look; a
// prune (another process's `leasectl audit prune --before` with a recent
// cut-off) that removed the release record before the poller looked
// leaves the waiter unwoken, though the key is free: a blocking acquire
// waits for the old lease's expiry, a holder does not hear a revoke. The
// poller could see, in the prune's mark (leasestore_audit_pruned), that
// records it had not read went, and wake every waiter.
func TestWaiterWokenByAReleaseThatAPruneRemovedBeforeThePollerLooked(t *testing.T) {
	path := migratedFile(t)
	a, err := sqlite.Open(ctxT(t), path, &sqlite.Config{NotifyInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	other := open(t, path, nil)
	rt := protocol.New(other, nil)
	ctx := ctxT(t)

	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Hour})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	ch, cancel, err := a.Subscribe(ctx, key("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	start := time.Now()
	rel, err := rt.Release(ctx, protocol.ReleaseRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token})
	wantStatus(t, "release", rel, err, protocol.StatusReleased)
	time.Sleep(2 * time.Millisecond)
	if _, err := other.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune-1"}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 900*time.Millisecond {
		t.Skip("the release and the prune took longer than the poller's interval: nothing shown")
	}
	select {
	case <-ch:
	case <-time.After(3 * time.Second):
		t.Fatalf("a waiter of ns/k on another Backend was not woken within 3s of the key's release by another connection " +
			"(whose record a prune removed before the poller looked); want it woken within about the notify interval (1s)")
	}
}
