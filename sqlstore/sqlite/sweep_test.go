package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
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

// A sweep in a batch that does not commit answers the error and no rows:
// it answered the rows it had removed inside the batch, which leasectl gc
// and the runtime's sweep events then counted as removed.
func TestSweepInBatchThatFailsRemovesNothing(t *testing.T) {
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("ended"), Owner: "w", TTL: time.Second, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	clock.Advance(time.Hour)

	release := sqlite.HoldWriter(b)
	defer release()
	bctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	late, _ := bctx.Deadline()
	type swept struct {
		n   protocol.SweepResult
		err error
	}
	sweeps := make(chan swept, 1)
	go func() {
		n, err := b.Sweep(bctx, 10, 0)
		sweeps <- swept{n, err}
	}()
	waitQueued(bctx, t, b, 1)
	slow := make(chan error, 1)
	go func() { slow <- sqlite.SlowWrite(bctx, b, "slow", late.Add(100*time.Millisecond)) }()
	waitQueued(bctx, t, b, 2)
	release()
	expectTimeout(t, "the slow write", <-slow)
	s := <-sweeps
	expectTimeout(t, "the sweep in the batch", s.err)
	if s.n != (protocol.SweepResult{}) {
		t.Errorf("sweep in a batch that did not commit: %+v; want nothing removed or set aside", s.n)
	}
	if n, err := b.Sweep(ctxT(t), 10, 0); err != nil || n.Removed != 1 {
		t.Errorf("sweep after: %+v, %v; want the ended lease's row removed", n, err)
	}
}
