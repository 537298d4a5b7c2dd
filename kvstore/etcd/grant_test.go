package etcd_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestSharedGrantOutlivesItsCaller: acquires wanting the same expiry
// second share one etcd lease grant, made by the first of them. When that
// caller's deadline passes during the grant, the others, whose deadlines
// are far, still acquire: another caller's deadline is not theirs. (The
// client's grants are slowed to 300 ms; the first caller gives up after
// 100 ms, the second asks 20 ms after it.)
func TestSharedGrantOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	slowGrant := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Lease/LeaseGrant" {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	b := open(t, etcd.WithDialOptions(&etcd.Config{Prefix: etcdcluster.Shared(t).Prefix(t)}, slowGrant))
	const ttl = 10 * time.Second
	// Start early in a second, so that both want the same expiry second.
	for time.Now().Nanosecond() > int(200*time.Millisecond) {
		time.Sleep(10 * time.Millisecond)
	}
	hasty, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := b.Acquire(hasty, protocol.AcquireRequest{Key: key("first"), Owner: "o", TTL: ttl, RequestID: "first"})
		first <- err
	}()
	time.Sleep(20 * time.Millisecond)
	ctx, cancel2 := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel2()
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("second"), Owner: "o", TTL: ttl, RequestID: "second"})
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("acquire with 10 s to go, sharing the grant of a caller whose 100 ms deadline passed: %v %v, want acquired", res.Status, err)
	}
	t.Logf("the hasty caller: %v", <-first)
}
