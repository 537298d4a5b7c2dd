package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// Hold takes any protocol.Store, and makes the request ids of its acquire
// and its release itself when the store is not a *Runtime; its renewals
// (and the renew confirming a replay) carry none. A Store that makes no
// request id, such as a backend (every *Backend has a Store's methods, so
// Hold(ctx, pgBackend, ...) compiles), then gets each renewal under the
// same empty id: from the second on they replay the first renewal, the
// lease is extended no more and runs out in the store while Held.Context
// stays live, and another owner takes the key under the holder's feet.
func TestHoldRenewsUnderFreshRequestIDsOnAStoreThatMakesNone(t *testing.T) {
	ctx := context.Background()
	backend := memstore.New(nil)
	other := protocol.New(backend, nil)
	defer other.Close(ctx)
	key := protocol.Key{Namespace: "ns", Name: "k"}
	h, err := protocol.Hold(ctx, backend, protocol.AcquireRequest{Key: key, Owner: "holder", TTL: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	time.Sleep(900 * time.Millisecond) // three TTLs, about eight renewals
	res, err := other.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "other", TTL: time.Minute})
	if h.Context().Err() == nil && !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("while Hold renewed its lease (its context live) another owner's acquire answered %s (token %d, %v); want conflict: "+
			"the renewals, sent without request ids, replayed the first and did not extend the lease (Held.Lease expires at %s)",
			res.Status, res.Lease.Token, err, h.Lease().ExpiresAt.Format(time.RFC3339Nano))
	}
}
