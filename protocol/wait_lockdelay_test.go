package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A wait that gives up while the lock-delay of a revoked lease keeps the
// key answers the conflict of its last attempt, which the store said a
// lock-delay caused. Contract v3: such a conflict's message starts
// "lock-delay: " (Result.KeptByLockDelay), and the scheduler, leasectl's
// output and run tell it from a live holder by that; the wait's answer
// must stay so, not read "held by O with token N until T" for a lease that
// ended at T.
func TestAcquireWaitGivingUpKeepsTheLockDelayVerdict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := protocol.Key{Namespace: "wait", Name: t.Name()}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute, LockDelay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	first, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute})
	if !first.KeptByLockDelay() {
		t.Fatalf("an acquire after the revoke answered %q (%v), want a conflict kept by the lock-delay", first.Status, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	res, err := protocol.AcquireWait(waitCtx, rt, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, nil)
	if res.Status != protocol.StatusConflict || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the wait answered %q (%v), want conflict matching context.DeadlineExceeded", res.Status, err)
	}
	var pe *protocol.Error
	if !res.KeptByLockDelay() || !errors.As(err, &pe) || !pe.KeptByLockDelay() {
		t.Fatalf("the wait's conflict (message %q) is not kept by the lock-delay (Result %v, Error %v); want the store's verdict kept, as its last attempt had it (%q)",
			res.Message, res.KeptByLockDelay(), pe != nil && pe.KeptByLockDelay(), first.Message)
	}
}
