package etcd_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestAcquiresAfterAnOperatorRevokesTheSharedEtcdLease: the operations of
// one second and TTL share an etcd lease (leasePool). An operator revokes
// it (`etcdctl lease revoke`); the acquires that follow at once, many at a
// time, would take the same grant from the pool: each must be taken (on a
// new grant), none fail.
func TestAcquiresAfterAnOperatorRevokesTheSharedEtcdLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	a := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for round := range 3 {
		if _, err := a.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("first%d", round)), Owner: "a", TTL: time.Minute,
			RequestID: fmt.Sprintf("first-%d", round)}); err != nil {
			t.Fatal(err)
		}
		entries, err := cli.Get(ctx, prefix+"k/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range entries.Kvs {
			if kv.Lease != 0 {
				_, _ = cli.Revoke(ctx, clientv3.LeaseID(kv.Lease))
			}
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				k := key(fmt.Sprintf("r%d-%d", round, i))
				if _, err := a.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "a", TTL: time.Minute,
					RequestID: fmt.Sprintf("r%d-%d", round, i)}); err != nil {
					t.Errorf("acquire of %s after an operator revoked the shared etcd lease: %v; want it taken", k, err)
				}
			})
		}
		wg.Wait()
	}
}
