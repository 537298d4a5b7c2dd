package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A prune reads each record before its cut-off once: a batch reads on
// from the greatest id the batch before it took, so the records live
// leases keep, at the front of the trail, are not read again by every
// later batch (each batch scanned past all of them, BenchmarkPruneBesideLiveLeases).
// What shows it: a live lease whose acquire record the first batch kept
// ends before the second, which leaves the record to the next prune
// rather than reading it again. Not parallel: it sets the package's batch
// size (two records a batch). The PostgreSQL backend's is
// TestAPruneReadsARecordItKeepsOnce.
func TestAPruneReadsARecordItKeepsOnce(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	var between func()
	b, err := sqlite.Open(ctx, migratedFile(t), sqlite.WithPruneBatchHook(sqlite.WithTestClock(nil, clock.Now), func() { between() }))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	sqlite.SetPruneBatch(t, 2)
	live, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("live"), Owner: "w", TTL: time.Hour, RequestID: "a-live"})
	wantStatus(t, "acquire live", live, err, protocol.StatusAcquired)
	for i := range 3 {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Second,
			RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
	cut := clock.Now()
	batches := 0
	between = func() {
		batches++
		if batches == 1 {
			res, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("live"), Owner: "w", Token: live.Lease.Token,
				RequestID: "r-live"})
			wantStatus(t, "release live between the batches", res, err, protocol.StatusReleased)
		}
	}
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: "prune"})
	if err != nil || res.Removed != 3 {
		t.Fatalf("prune whose first batch kept live's acquire (live released before the second): %+v, %v; want 3 "+
			"records removed (k0, k1, k2's acquires), live's acquire left to the next prune, not read again", res, err)
	}
	res, err = b.PruneAudit(ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: "prune-2"})
	if err != nil || res.Removed != 1 {
		t.Fatalf("the next prune: %+v, %v; want live's acquire removed", res, err)
	}
}
