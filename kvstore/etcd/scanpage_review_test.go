package etcd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestListBesideOtherKeysSeesEveryLiveLease: docs/etcd.md lets a store
// live beside keys another client put under PREFIX/k/ that are no entries
// of the store (TestDestroyKeepsOtherKeys). With enough of them before a
// lease's entries in the namespace's range, the page boundary of the
// list's scan (600 entries a range) falls between that lease's liveness
// entry and its owner and renewal entries, while the page holds no other
// lease: the scan then hands the lease over in two halves, neither of
// which is a live lease, and the list leaves out a lease that get finds
// live (a scheduler or `leasectl list` would take its key for free).
func TestListBesideOtherKeysSeesEveryLiveLease(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	b := open(t, &etcd.Config{Prefix: c.Prefix(t)})
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// 599 keys of another client in the namespace's range, before the
	// lease's: none parses as an entry of the store.
	for i := range 599 {
		if _, err := cli.Put(ctx, fmt.Sprintf("%sk/ns\x00a%04d", b.Prefix(), i), "not leasestore's"); err != nil {
			t.Fatal(err)
		}
	}
	a, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "o", TTL: time.Minute, RequestID: "acquire-b"})
	if err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	if g, err := b.Get(ctx, protocol.GetRequest{Key: key("b")}); err != nil || g.Status != protocol.StatusFound {
		t.Fatalf("get: %v %v, want found", g.Status, err)
	}
	page, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 100})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(page.Leases) != 1 || page.Leases[0].Key != key("b") || page.Leases[0].Token != a.Lease.Token {
		t.Fatalf("list of namespace ns answered %d leases %+v; want the live lease ns/b (token %d) that get finds", len(page.Leases), page.Leases, a.Lease.Token)
	}
}
