package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A Hold over a backend used directly (a Store Hold serves: see
// RequestIDFor) must lose a revoked lease: the backend answers the refused
// renewal not_found in its Result with a nil error (protocol.Backend's
// rule), and Hold must not take that for a renewal. Here the lease is
// revoked through another handle; its holder must hear it within a few
// TTLs at worst (at its next renewal), not keep its context live for ever.
func TestHoldOverABackendLosesARevokedLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.NewStore(nil)
	b, admin := st.Handle(), st.Handle()
	defer b.Close(ctx)
	defer admin.Close(ctx)
	k := holdKey(t)
	const ttl = 300 * time.Millisecond
	h, err := protocol.Hold(ctx, b, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: ttl, RequestID: "acq-1"},
		&protocol.HoldConfig{RenewEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	res, err := admin.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck", RequestID: "rev-1"})
	if err != nil || res.Status != protocol.StatusRevoked {
		t.Fatalf("revoke: %s, %v", res.Status, err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(10 * ttl):
		got, _ := b.Get(ctx, protocol.GetRequest{Key: k})
		t.Fatalf("the lease was revoked %s ago (ttl %s, renewed every 50ms) and its Hold over a bare backend still reports it held "+
			"(get answers %s): the renewals' not_found answers (nil error) were taken for renewals", 10*ttl, ttl, got.Status)
	}
}
