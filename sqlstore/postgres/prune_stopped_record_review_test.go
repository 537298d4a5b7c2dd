package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// DESIGN.md: records leave the trail only through a prune, which "is itself
// recorded". A prune whose context ends between its batches has removed
// records for good (its batches committed) but writes its record only with
// the last batch: the trail then has records missing and no record of who
// removed them, when, or how many. Not parallel: it sets the batch size.
func TestAPruneThatStopsEarlyIsRecorded(t *testing.T) {
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := openBackend(t, dsn, postgres.WithPruneBatchHook(postgres.WithTestClock(nil, clock.Now), cancel))
	postgres.SetPruneBatch(t, 2)
	for i := range 5 {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Second,
			RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
	res, perr := b.PruneAudit(pctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"})
	if perr == nil || res.Removed == 0 {
		t.Fatalf("prune cut off after its first batch: %+v, %v; want it stopped after removing records", res, perr)
	}
	page, err := b.ReadAudit(ctx, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(page.Records); got != 5-int(res.Removed)+1 {
		var ops []string
		for _, r := range page.Records {
			ops = append(ops, string(r.Op)+" "+r.Key)
		}
		t.Fatalf("trail after a prune that removed %d of 5 records and stopped (%v): %q; "+
			"want the records left and a prune record counting the %d removed", res.Removed, perr, ops, res.Removed)
	}
}
