package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestReleaseLeavesNothingOnEtcdLeases: the etcd leases a backend grants
// are shared by the acquires wanting the same expiry second and TTL, so a release
// cannot revoke them (that would end the other leases attached); it
// deletes its entries instead, the liveness and lock-delay entries
// attached to them included (as does a revoke of a lease without a
// lock-delay). Under churn (acquire and release or revoke of distinct
// keys, half with a lock-delay) nothing is left under the
// store's lease entries, no granted etcd lease holds a key, and the
// grants number about one per expiry second wanted (two a second here:
// the TTL's and the TTL-plus-delay's), not one per acquire: an etcd lease
// outlives its last key by at most its TTL, and their number is bounded
// by time, not by the operations made.
func TestReleaseLeavesNothingOnEtcdLeases(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var granted []clientv3.LeaseID
	countGrants := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := reply.(*pb.LeaseGrantResponse); ok && err == nil && method == "/etcdserverpb.Lease/LeaseGrant" {
			mu.Lock()
			granted = append(granted, clientv3.LeaseID(r.ID))
			mu.Unlock()
		}
		return err
	})
	b := open(t, etcd.WithDialOptions(&etcd.Config{Prefix: etcdcluster.Shared(t).Prefix(t)}, countGrants))
	rt := protocol.New(b, nil)
	ctx := t.Context()
	const cycles = 200
	start := time.Now()
	for i := range cycles {
		req := protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "o", TTL: 30 * time.Second}
		if i%2 == 1 {
			req.LockDelay = time.Minute
		}
		res, err := rt.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if i%4 == 2 { // a revoke of a lease without a lock-delay leaves nothing either
			_, err = rt.Revoke(ctx, protocol.RevokeRequest{Key: req.Key, Actor: "ops", Reason: "test", Token: res.Lease.Token})
		} else {
			_, err = rt.Release(ctx, protocol.ReleaseRequest{Key: req.Key, Owner: "o", Token: res.Lease.Token})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	seconds := int(time.Since(start)/time.Second) + 1
	left, err := b.Client().Get(ctx, b.Prefix()+"k/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Kvs) != 0 {
		t.Fatalf("after %d acquires and releases, %d lease entries are left, the first %q; want none", cycles, len(left.Kvs), left.Kvs[0].Key)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d cycles in %d s: %d etcd leases granted", cycles, seconds, len(granted))
	if len(granted) > 2*(seconds+2) {
		t.Fatalf("%d cycles in %d s granted %d etcd leases; want at most two for each second (and a few more)", cycles, seconds, len(granted))
	}
	for _, id := range granted {
		ttl, err := b.Client().TimeToLive(ctx, id, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		if len(ttl.Keys) != 0 {
			t.Fatalf("etcd lease %x (%d s to live) still holds %d keys after every release, the first %q", id, ttl.TTL, len(ttl.Keys), ttl.Keys[0])
		}
	}
}
