package etcd_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestSweepBesideOtherKeysKeepsALockDelay: with 599 keys of another
// client before an expired lease's entries in its namespace's range, the
// first range of Sweep's scan (600 entries) ends on the lease's lock-delay
// entry (its first, \x00d), which holds the key for another hour; the
// sweep must still see the lease whole, under its lock-delay, and leave
// its entries (the conflict an acquire meets shows that lease), not read
// the rest of them as an expired lease without a lock-delay and remove
// them.
func TestSweepBesideOtherKeysKeepsALockDelay(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	b := open(t, etcd.WithTestClock(&etcd.Config{Prefix: c.Prefix(t)}, clock))
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := range 599 {
		if _, err := cli.Put(ctx, fmt.Sprintf("%sk/ns\x00a%04d", b.Prefix(), i), "not leasestore's"); err != nil {
			t.Fatal(err)
		}
	}
	a, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "o", TTL: time.Minute, LockDelay: time.Hour, RequestID: "acquire-b"})
	if err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	now.Add(int64(2 * time.Minute)) // expired a minute ago; the lock-delay holds for 59 more
	res, err := b.Sweep(ctx, 100, 0)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	owner, err := cli.Get(ctx, b.Prefix()+"k/ns\x00b\x00o")
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 0 || len(owner.Kvs) != 1 {
		t.Fatalf("sweep under the lease's lock-delay removed %d leases (owner entry left: %d); want none removed, the entries kept while the lock-delay holds the key",
			res.Removed, len(owner.Kvs))
	}
}
