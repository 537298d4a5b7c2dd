package etcd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestPruneFitsTheClusterTxnLimit: a cluster whose --max-txn-ops is below
// the 102 operations of a full prune transaction (100 deletions, the
// mark, the prune's record) still prunes: a refused transaction applied
// nothing, so the prune halves its batches until they fit. It failed with
// unavailable ("too many operations in txn request") on every such
// cluster.
func TestPruneFitsTheClusterTxnLimit(t *testing.T) {
	t.Parallel()
	c, err := etcdcluster.Start(t.Context(), &etcdcluster.Options{Members: 1, MaxTxnOps: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b := openAt(t, &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/prune-limit/"})
	rt := protocol.New(b, nil)
	ctx := t.Context()
	const records = 90
	for i := range records {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: fmt.Sprint("k", i)}, Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil {
		t.Fatalf("prune on a cluster allowing 40 operations a transaction: %v", err)
	}
	if res.Removed != records {
		t.Fatalf("prune removed %d records, want %d", res.Removed, records)
	}
	leases, left, err := b.Counts(ctx)
	if err != nil || leases != records || left != 1 {
		t.Fatalf("after the prune: %d leases, %d records, %v; want %d leases and the prune's own record", leases, left, err, records)
	}
}
