package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// Hold confirms a replayed acquire with a renew; a renew answered renewed
// confirmed it, with or without a copy of the lease in the answer (Hold's
// renewals take it so: "An answer without the lease ... still renewed
// it"). Hold must then return the Held, not an error that leaves the
// caller unaware it holds the lease (and a retry of the same request id
// meeting the same error until the lease runs out).
func TestHoldConfirmsAReplayAnsweredWithoutTheLease(t *testing.T) {
	t.Parallel()
	rt := protocol.New(&leaselessRenew{Backend: memstore.New(nil)}, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	ctx := context.Background()
	req := protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: 30 * time.Second, RequestID: "first"}
	first, err := rt.Acquire(ctx, req) // its answer "lost": Hold is called again with its id
	if err != nil {
		t.Fatal(err)
	}
	h, err := protocol.Hold(ctx, rt, req, nil)
	if err != nil {
		t.Fatalf("Hold replaying a held acquire, confirmed by a renew answered renewed without the lease: %v; want the Held", err)
	}
	defer func() { _ = h.Release(ctx) }()
	if h.Token() != first.Lease.Token || h.Lease().Token != first.Lease.Token || h.Lease().Owner != "o" {
		t.Errorf("Held token %d, lease %+v; want token %d owned by o", h.Token(), h.Lease(), first.Lease.Token)
	}
	if h.Context().Err() != nil {
		t.Errorf("the Held's context ended: %v", context.Cause(h.Context()))
	}
}
