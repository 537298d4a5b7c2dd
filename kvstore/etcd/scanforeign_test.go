package etcd_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/protocol"
)

// TestScanBesideForeignKeysInsideALeaseStaysBounded: another client's
// keys may lie inside a lease's own prefix (PREFIX/k/NS\0NAME\0...,
// none an entry of the store). When a range of the scan (600 entries)
// ends among them, holding that lease alone, the scan reads the lease
// again; that read must stay as bounded as a range is, not take every
// foreign key under the lease's prefix in one response: here 2,000 keys
// of 1 KiB, which a client that caps its responses at 1 MiB (a common
// clientv3.Config.MaxCallRecvMsgSize) refuses, failing the list although
// each range of 600 entries fits.
func TestScanBesideForeignKeysInsideALeaseStaysBounded(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	b := cappedStore(t, c, c.Prefix(t))
	a, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "o", TTL: time.Minute, RequestID: "acquire-b"})
	if err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	putForeignInside(t, c, b.Prefix()+"k/ns\x00b\x00", 2000)
	page, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 100})
	if err != nil {
		t.Fatalf("list beside 2,000 foreign keys of 1 KiB inside the lease's prefix, on a client taking responses up to 1 MiB: %v; "+
			"want the live lease, read in responses no larger than a range of 600 entries", err)
	}
	if len(page.Leases) != 1 || page.Leases[0].Key != key("b") || page.Leases[0].Token != a.Lease.Token {
		t.Fatalf("list answered %+v; want the live lease ns/b (token %d)", page.Leases, a.Lease.Token)
	}
}
