package etcd_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/protocol"
)

// TestPruneKeepsALiveLeasesAcquireBesideForeignKeysInsideItsPrefix: a
// prune reads which leases are live, to keep the records a retry of their
// acquire is answered from. With another client's keys under a live
// lease's prefix (2,000 of 1 KiB) it must read that lease's entries by
// name, not every key under the prefix or the lease family in one
// response, which a client that caps its responses at 1 MiB refuses; and
// it keeps the live lease's acquire, whose retry then replays.
func TestPruneKeepsALiveLeasesAcquireBesideForeignKeysInsideItsPrefix(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	b := cappedStore(t, c, c.Prefix(t))
	req := protocol.AcquireRequest{Key: key("b"), Owner: "o", TTL: time.Hour, RequestID: "acquire-b"}
	a, err := b.Acquire(ctx, req)
	if err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	putForeignInside(t, c, b.Prefix()+"k/ns\x00b\x00", 2000)
	time.Sleep(2 * time.Millisecond)
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil || res.Removed != 0 {
		t.Fatalf("prune beside 2,000 foreign keys of 1 KiB under the live lease's prefix, on a client taking responses "+
			"up to 1 MiB: %+v, %v; want nothing removed (the live lease's acquire kept)", res, err)
	}
	again, err := b.Acquire(ctx, req)
	if err != nil || again.Status != protocol.StatusAcquired || !again.Replayed || again.Lease == nil || again.Lease.Token != a.Lease.Token {
		t.Fatalf("retry of the acquire after the prune: %+v, %v; want the replay of token %d", again, err, a.Lease.Token)
	}
}
