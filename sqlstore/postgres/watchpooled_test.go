package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// Behind a transaction pooler without Config.ListenDSN the backend cannot
// signal (Subscribe says waiters poll): protocol.WatchLease returns at
// once, as its doc says of a store that cannot signal, instead of making
// the subscription again every few seconds for the whole hold.
func TestWatchLeaseThroughPoolerWithoutListenDSNReturnsAtOnce(t *testing.T) {
	t.Parallel()
	b := openBackend(t, pgtest.MigratedDSN(t)+"&pooler=transaction", nil)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	protocol.WatchLease(ctx, b, *res.Lease, time.Second, func(why error) { t.Errorf("lost: %v", why) })
	if took := time.Since(start); took > time.Second {
		t.Fatalf("WatchLease through a pooler without ListenDSN returned after %v (its context's end), want at once: "+
			"it kept subscribing to a store that cannot signal", took.Round(100*time.Millisecond))
	}
}
