package etcd_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/audit"
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

// TestChangesRecordTheTimeTheyTakeEffect: a change records the time it
// takes effect, read after the etcd lease grant it waits for (contract v3:
// "the time a change takes effect is the time it records"), so that on one
// clock the trail never dates a change before one it came after. The
// grants of handle a are slowed to 1 s (a busy cluster); 300 ms after a
// starts a change, handle b makes one that a's comes after: the release
// that frees the key a acquires, or a change of another key while a
// renews (to a new TTL) or revokes a lease with a lock-delay. Before, each
// was dated at the time read before its grant, about 300 ms before b's.
func TestChangesRecordTheTimeTheyTakeEffect(t *testing.T) {
	t.Parallel()
	slowGrant := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Lease/LeaseGrant" {
			time.Sleep(time.Second)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	prefix := etcdcluster.Shared(t).Prefix(t)
	a := open(t, etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, slowGrant))
	b := open(t, &etcd.Config{Prefix: prefix})
	ctx := t.Context()
	must := func(res protocol.Result, err error) protocol.Result {
		t.Helper()
		if err != nil || (res.Status != protocol.StatusAcquired && res.Status != protocol.StatusReleased) {
			t.Fatalf("%v %v", res.Status, err)
		}
		return res
	}
	// during runs change in the background and before (whose request id
	// is rid) 300 ms into it, and returns change's result and the time
	// before's record says.
	during := func(what string, change func() (protocol.Result, error), rid string, before func()) (protocol.Result, time.Time) {
		t.Helper()
		done := make(chan protocol.Result, 1)
		go func() {
			res, err := change()
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
			done <- res
		}()
		time.Sleep(300 * time.Millisecond)
		before()
		page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Newest: true, Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			if r.RequestID == rid {
				return <-done, r.At
			}
		}
		t.Fatalf("%s: no record of the change made meanwhile", what)
		return protocol.Result{}, time.Time{}
	}

	held := must(b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "b", TTL: time.Minute, RequestID: "b1"}))
	got, freedAt := during("a's acquire", func() (protocol.Result, error) {
		return a.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: 37 * time.Second, RequestID: "a1"})
	}, "b2", func() {
		must(b.Release(ctx, protocol.ReleaseRequest{Key: key("k"), Owner: "b", Token: held.Lease.Token, RequestID: "b2"}))
	})
	if got.Status != protocol.StatusAcquired {
		t.Fatalf("a's acquire after b's release: %v, want acquired", got.Status)
	}
	if got.Lease.AcquiredAt.Before(freedAt) {
		t.Errorf("a's acquire (token %d) is dated %s, %v before b's release that freed the key (%s)",
			got.Lease.Token, got.Lease.AcquiredAt.Format(time.StampMicro), freedAt.Sub(got.Lease.AcquiredAt), freedAt.Format(time.StampMicro))
	}

	renewed, otherAt := during("a's renew", func() (protocol.Result, error) {
		return a.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "a", Token: got.Lease.Token, TTL: 53 * time.Second, RequestID: "a2"})
	}, "b3", func() {
		must(b.Acquire(ctx, protocol.AcquireRequest{Key: key("other"), Owner: "b", TTL: time.Minute, RequestID: "b3"}))
	})
	if renewed.Status != protocol.StatusRenewed {
		t.Fatalf("a's renew: %v, want renewed", renewed.Status)
	}
	if renewed.Lease.RenewedAt.Before(otherAt) {
		t.Errorf("a's renew is dated %s, %v before b's acquire committed before it (%s)",
			renewed.Lease.RenewedAt.Format(time.StampMicro), otherAt.Sub(renewed.Lease.RenewedAt), otherAt.Format(time.StampMicro))
	}

	delayed := must(b.Acquire(ctx, protocol.AcquireRequest{Key: key("delayed"), Owner: "b", TTL: time.Minute, LockDelay: 41 * time.Second, RequestID: "b4"}))
	revoked, otherAt := during("a's revoke", func() (protocol.Result, error) {
		return a.Revoke(ctx, protocol.RevokeRequest{Key: key("delayed"), Actor: "a", Reason: "test", Token: delayed.Lease.Token, RequestID: "a3"})
	}, "b5", func() {
		must(b.Acquire(ctx, protocol.AcquireRequest{Key: key("another"), Owner: "b", TTL: time.Minute, RequestID: "b5"}))
	})
	if revoked.Status != protocol.StatusRevoked {
		t.Fatalf("a's revoke: %v, want revoked", revoked.Status)
	}
	page, err := a.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: "delayed", Newest: true, Limit: 1})
	if err != nil || len(page.Records) != 1 || page.Records[0].Op != protocol.OpRevoke {
		t.Fatalf("the revoke's record: %v %v", page.Records, err)
	}
	if at := page.Records[0].At; at.Before(otherAt) {
		t.Errorf("a's revoke is dated %s, %v before b's acquire committed before it (%s)",
			at.Format(time.StampMicro), otherAt.Sub(at), otherAt.Format(time.StampMicro))
	}
}
