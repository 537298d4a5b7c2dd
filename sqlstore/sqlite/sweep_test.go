package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// Sweep given a negative grace or max (a Go caller's bad arithmetic)
// removes no live lease: only the rows of leases that ended, at most max
// of them, as PostgreSQL's and etcd's sweeps do. It removed live leases,
// with no audit record, and a negative max removed every row.
func TestSweepBadArgumentsKeepLiveLeases(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("ended"), Owner: "w", TTL: time.Second, RequestID: "a1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	clock.Advance(2 * time.Second)
	res, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("live"), Owner: "w", TTL: time.Minute, RequestID: "a2"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	if n, err := b.Sweep(ctx, -1, 0); err != nil || n.Removed != 0 {
		t.Errorf("sweep with max -1: %+v, %v; want nothing removed", n, err)
	}
	if n, err := b.Sweep(ctx, 10, -time.Hour); err != nil || n.Removed != 1 {
		t.Errorf("sweep with grace -1h: %+v, %v; want the ended lease's row removed, only it", n, err)
	}
	got, err := b.Get(ctx, protocol.GetRequest{Key: key("live"), RequestID: "g"})
	wantStatus(t, "get of the live lease after the sweeps", got, err, protocol.StatusFound)
}
