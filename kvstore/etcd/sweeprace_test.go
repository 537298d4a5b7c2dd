package etcd_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestSweepKeepsALeaseAcquiredAfterItsRead: a sweep reads an expired
// lease (past the grace, no lock-delay holding it) and, just before its
// transaction removes it, another handle acquires the key with a
// lock-delay. The sweep's transaction compares the entries it read, so
// it must remove nothing: the new lease stays live and, once revoked, its
// lock-delay keeps the key (a sweep that removed the new lease's entries,
// or left its lock-delay without its owner, would let an acquire in).
func TestSweepKeepsALeaseAcquiredAfterItsRead(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	ctx := t.Context()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	other := open(t, etcd.WithTestClock(&etcd.Config{Prefix: prefix}, clock))
	var armed atomic.Bool
	var late protocol.Result
	lateErr := error(nil)
	raced := false
	between := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && deletes(txn) && armed.CompareAndSwap(true, false) {
			raced = true
			late, lateErr = other.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "late", TTL: time.Minute,
				LockDelay: time.Hour, RequestID: "late"})
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	b := open(t, etcd.WithTestClock(etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, between), clock))
	if a, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "first", TTL: time.Minute, RequestID: "first"}); err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	now.Add(int64(2 * time.Minute)) // expired a minute ago
	armed.Store(true)
	res, err := b.Sweep(ctx, 100, 0)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if !raced || lateErr != nil || late.Status != protocol.StatusAcquired {
		t.Fatalf("acquire between the sweep's read and its transaction: sent %v, %v %v; nothing tested", raced, late.Status, lateErr)
	}
	if res.Removed != 0 {
		t.Errorf("sweep removed %d leases; want none: the key was acquired again after the sweep read it", res.Removed)
	}
	if g, err := b.Get(ctx, protocol.GetRequest{Key: key("k")}); err != nil || g.Status != protocol.StatusFound || g.Lease.Token != late.Lease.Token {
		t.Fatalf("get after the sweep: %v %+v %v; want the lease acquired meanwhile (token %d), live", g.Status, g.Lease, err, late.Lease.Token)
	}
	if r, err := b.Revoke(ctx, protocol.RevokeRequest{Key: key("k"), Actor: "op", Reason: "test", RequestID: "revoke"}); err != nil || r.Status != protocol.StatusRevoked {
		t.Fatalf("revoke: %v %v", r.Status, err)
	}
	if c, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "third", TTL: time.Minute, RequestID: "third"}); err != nil || c.Status != protocol.StatusConflict {
		t.Fatalf("acquire within the revoked lease's lock-delay (1h): %v %v; want conflict", c.Status, err)
	}
}
