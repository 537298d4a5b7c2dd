package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// TestSweepWithANegativeGraceKeepsALockDelay sweeps, with a negative grace
// (a Go caller's bad arithmetic), a store whose revoked lease's lock-delay
// still runs. protocol.Sweeper: "a negative grace counts as 0: a lease that
// has not ended (nor its lock-delay) is never removed". The row holds the
// lock-delay, so removing it lets anyone take the key at once, during the
// delay the contract keeps it for (acquires answer conflict until it ends).
func TestSweepWithANegativeGraceKeepsALockDelay(t *testing.T) {
	t.Parallel()
	b := openBackend(t, pgtest.MigratedDSN(t), nil)
	ctx := ctxT(t)
	ns := pgtest.Namespace() // the sweep tries the key's writer lock, which every schema shares
	k := protocol.Key{Namespace: ns, Name: "delayed"}
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, LockDelay: 30 * time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", held, err, protocol.StatusAcquired)
	rev, err := b.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "test", RequestID: "r"})
	wantStatus(t, "revoke", rev, err, protocol.StatusRevoked)
	// A greater token elsewhere: the sweep never removes the row holding the greatest.
	filler, err := b.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: ns, Name: "filler"}, Owner: "o",
		TTL: time.Hour, RequestID: "f"})
	wantStatus(t, "acquire filler", filler, err, protocol.StatusAcquired)
	before, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "p", TTL: time.Minute, RequestID: "p1"})
	wantStatus(t, "acquire during the lock-delay, before the sweep", before, err, protocol.StatusConflict)
	if _, err := b.Sweep(ctx, 100, -time.Hour); err != nil {
		t.Fatalf("sweep with grace -1h: %v", err)
	}
	after, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "p", TTL: time.Minute, RequestID: "p2"})
	if err != nil || after.Status != protocol.StatusConflict {
		t.Fatalf("acquire during the 30m lock-delay of a revoke, after a sweep with grace -1h: %q (%v), want conflict: "+
			"the sweep removed the row that held the lock-delay", after.Status, err)
	}
}
