package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A renewal whose outcome is unknown (timeout) is sent again while the
// lease may still be live, as Hold's doc says, whatever Store Hold was
// given: a backend used directly (which RequestIDFor's doc names as a Store
// Hold serves) answers a timeout with an error and an empty Result, and
// Hold must judge the error's status, not the Result's. Here every renewal
// times out (RenewTimeout 1ns), so the lease is given up by the local
// clock: its Release then still sends the release, and the key is free.
func TestHoldOverABackendRetriesARenewalThatTimedOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.NewStore(nil)
	b := st.Handle()
	defer b.Close(ctx)
	k := holdKey(t)
	const ttl = 600 * time.Millisecond
	start := time.Now()
	h, err := protocol.Hold(ctx, b, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: ttl, RequestID: "acq-1"},
		&protocol.HoldConfig{RenewEvery: 50 * time.Millisecond, RenewTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the hold never ended")
	}
	lostAfter := time.Since(start)
	cause := context.Cause(h.Context())
	if lostAfter < ttl/2 {
		t.Errorf("Hold over a bare backend gave the lease up %s after the acquire (ttl %s), with cause %q: "+
			"one renewal that timed out (outcome unknown) was taken for a loss while the lease was live; "+
			"want it sent again until the lease would run out by the local clock", lostAfter.Round(time.Millisecond), ttl, cause)
	}
	// Bounded by its own deadline: the renewal timeout (1ns) would bound it otherwise.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = h.Release(rctx)
	res, err := b.Get(ctx, protocol.GetRequest{Key: k}) // a backend answers not_found in its Result
	if err != nil || res.Status != protocol.StatusNotFound {
		t.Errorf("after the hold was given up and released, get answered %s (lease %+v): "+
			"the release a lease given up by the local clock gets was not sent, the key stays held until its TTL", res.Status, res.Lease)
	}
}
