package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A non-zero lock-delay is never quietly stored as none. The store keeps
// lock-delays to the microsecond, and zero means "none" once stored but
// "the namespace default" in a request: a request for 500ns, which
// Validate accepts ([0, 1h]) and which wins over the namespace default
// (DESIGN.md: "a request's non-zero delay wins"), must not leave the lease
// with no lock-delay at all. Either it is refused as invalid (as a TTL
// under MinTTL is), or the lease keeps one (the default, or the request's
// rounded up): after a revoke, an acquire must not take the key at once.
func TestSubMicrosecondLockDelayIsNotQuietlyNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{
		{Namespaces: "*", Delay: 15 * time.Second}}})
	defer rt.Close(ctx)
	k := holdKey(t)
	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, LockDelay: 500 * time.Nanosecond})
	if errors.Is(err, protocol.ErrInvalid) {
		return // refused: fine
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck"}); err != nil {
		t.Fatal(err)
	}
	next, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w2", TTL: time.Minute})
	if err == nil {
		t.Fatalf("acquire with lock-delay 500ns (namespace default 15s) was accepted and stored with lock-delay %v; "+
			"after its revoke another owner took the key at once (%s, token %d): the request's non-zero delay, "+
			"truncated to the microsecond, left the lease with none and skipped the namespace default",
			res.Lease.LockDelay, next.Status, next.Lease.Token)
	}
}
