package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestAPruneThatStopsEarlyIsRecorded: records leave the trail only through
// a prune, which "is itself recorded" (DESIGN.md). A prune cut off after
// its first transaction (two transactions of records) has removed records
// for good (its next transaction is cut off before it is sent): the trail
// must hold a prune record counting them.
func TestAPruneThatStopsEarlyIsRecorded(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	ctx := t.Context()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pruning, firstBatchDone atomic.Bool
	cut := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(*pb.TxnRequest); ok && firstBatchDone.Load() && pctx.Err() == nil {
			cancel() // the prune's next transaction: cut off before it is sent
			return context.Canceled
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if txn, ok := req.(*pb.TxnRequest); ok && pruning.Load() && deletes(txn) && err == nil {
			firstBatchDone.Store(true)
		}
		return err
	})
	pruner := open(t, clockJudged(etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, cut)))
	b := open(t, &etcd.Config{Prefix: prefix})
	const records = pruneBatchSize + 50 // two batches
	for i := range records {
		if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "o", TTL: time.Millisecond,
			RequestID: fmt.Sprint("a", i)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the leases have ended
	pruning.Store(true)
	res, perr := pruner.PruneAudit(pctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"})
	if perr == nil || res.Removed == 0 {
		t.Fatalf("prune cut off after its first batch: %+v, %v; want it stopped after removing records", res, perr)
	}
	var prunes []audit.Record
	left := 0
	for cursor := ""; ; {
		page, err := b.ReadAudit(ctx, audit.Query{Cursor: cursor, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			if r.Op == audit.OpPrune {
				prunes = append(prunes, r)
			} else {
				left++
			}
		}
		if page.NextCursor == "" || len(page.Records) < 100 {
			break
		}
		cursor = page.NextCursor
	}
	want := fmt.Sprintf("removed %d records before", res.Removed)
	if left != records-int(res.Removed) || len(prunes) != 1 || !strings.Contains(prunes[0].Reason, want) {
		t.Fatalf("trail after a prune that removed %d of %d records and stopped (%v): %d records left, prune records %+v; "+
			"want the records left and a prune record counting the %d removed", res.Removed, records, perr, left, prunes, res.Removed)
	}
}
