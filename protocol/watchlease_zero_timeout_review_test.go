package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestWatchLeaseZeroTimeoutHearsRevoke: WatchLease's timeout bounds each
// get it makes after a signal. A zero timeout (the zero value, as a
// caller who wants "the default" writes it) must not turn every get into
// a timeout, which "tells nothing": the revoke would never be heard, and
// the holder would keep working until its own renewal fails.
func TestWatchLeaseZeroTimeoutHearsRevoke(t *testing.T) {
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	key := protocol.Key{Namespace: "review", Name: "watch-zero"}
	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		protocol.WatchLease(wctx, rt, *res.Lease, 0, func(why error) { lost <- why })
	}()
	time.Sleep(100 * time.Millisecond) // the subscription is made
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: key, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-lost:
		if !errors.Is(why, protocol.ErrNotFound) {
			t.Errorf("lost(%v); want a cause matching ErrNotFound", why)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("WatchLease with timeout 0: the revoke was not heard within 5s (every get after the signal times out at once)")
	}
	cancel()
	<-done
}
