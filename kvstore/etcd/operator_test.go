package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestStoreCopiedIntoANewClusterKeepsTokensRising: an operator moves a
// store to a new cluster by copying its keys (`etcdctl make-mirror
// --prefix P`, or get --prefix and put: the etcd analogue of pg_dump/
// pg_restore into a new cluster). The new cluster's revision starts low,
// and fencing tokens are revisions, so the copied store would issue tokens
// already issued on the old one. The contract: made harmless (the next
// acquire's token is above every token the store issued) or refused at
// open/health with an error naming the fix. Refused here: Open of the copy,
// and Health (in one request, as before) of a process that opened the new
// cluster's store before the copy was made (a service started early, whose
// revision guard saw nothing higher), each unavailable naming
// --bump-revision. (The old cluster is the shared one; the new one is a
// one-member cluster of the test's own.)
func TestStoreCopiedIntoANewClusterKeepsTokensRising(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := etcdcluster.Shared(t)
	prefix := src.Prefix(t)
	old := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	srcCli, err := src.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer srcCli.Close()
	// Other work on the old cluster raises its revision: 300 writes of one
	// key, which a copy carries as one.
	for i := range 300 {
		if _, err := srcCli.Put(ctx, prefix+"elsewhere", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := old.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	issued := res.Lease.Token
	if _, err := old.Release(ctx, protocol.ReleaseRequest{Key: key("k"), Owner: "a", Token: issued}); err != nil {
		t.Fatal(err)
	}

	dst, err := etcdcluster.Start(ctx, &etcdcluster.Options{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Stop)
	var requests atomic.Int64
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		requests.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	running := openAt(t, etcd.WithDialOptions(&etcd.Config{Endpoints: dst.Endpoints(), Prefix: prefix}, count))
	dstCli, err := clientv3.New(clientv3.Config{Endpoints: dst.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer dstCli.Close()
	// What make-mirror's first sync does: every key under the prefix at
	// one revision, put on the new cluster.
	all, err := srcCli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Kvs {
		if _, err := dstCli.Put(ctx, string(kv.Key), string(kv.Value)); err != nil {
			t.Fatal(err)
		}
	}

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "--bump-revision") {
			t.Errorf("%s: %v; want unavailable naming --bump-revision", what, err)
		}
	}
	before := requests.Load()
	refused("health of a process that opened the new cluster's store before the copy", running.Health(ctx))
	if n := requests.Load() - before; n != 1 {
		t.Errorf("health made %d requests; want 1", n)
	}
	b, err := etcd.Open(ctx, &etcd.Config{Endpoints: dst.Endpoints(), Prefix: prefix})
	if err == nil {
		defer b.Close(ctx)
		got, err := protocol.New(b, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "b", TTL: time.Minute})
		if err == nil && got.Lease.Token <= issued {
			t.Fatalf("acquire on the store copied into a new cluster: token %d, not above %d which the store issued before the copy (open and health said nothing)",
				got.Lease.Token, issued)
		}
	}
	refused("open of the store copied into a new cluster", err)
}

// TestForeignEtcdLeaseRevokeIsHeardByTheHolderAtOnce: an operator revokes
// the etcd lease the store attached a key's liveness entry to (`etcdctl
// lease list`, `etcdctl lease revoke ID`: another etcd client). Expiry is
// the cluster's, through etcd leases (DESIGN.md), and etcd lets whoever may
// write the prefix revoke them, as PostgreSQL lets a DBA `DELETE FROM
// leasestore_leases`: the lease ends then, before the expires_at its holder
// was told, and no backend can keep the key held. (The reviewer's first
// version asserted that a get still found the lease and another owner's
// acquire answered conflict until expires_at, which cannot hold: see
// docs/etcd.md, "What another etcd client can do".) What holds: the holder
// hears the loss at once, from the deletion its watch of the key delivers,
// not at a renewal (none is due for 50 s here): its Held's context ends,
// the cause matching ErrLeaseLost and ErrNotFound; and fencing holds, as
// the key's next holder gets a greater token and the old holder's renew is
// refused.
func TestForeignEtcdLeaseRevokeIsHeardByTheHolderAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	a := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	b := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	held, err := protocol.Hold(ctx, a, protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 50 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	lease := held.Lease()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	entries, err := cli.Get(ctx, prefix+"k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	revoked := 0
	for _, kv := range entries.Kvs {
		if kv.Lease != 0 {
			if _, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				t.Fatal(err)
			}
			revoked++
		}
	}
	if revoked == 0 {
		t.Fatal("no entry of the lease is attached to an etcd lease")
	}
	if time.Since(lease.RenewedAt) > 30*time.Second {
		t.Skip("the machine was too slow: a renewal would be due before the wait below ends")
	}
	select {
	case <-held.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the holder did not hear within 10s that another etcd client revoked its etcd lease (%v before its expires_at)",
			time.Until(lease.ExpiresAt).Round(time.Second))
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrNotFound) {
		t.Errorf("the holder's context ended with %v; want a loss matching ErrLeaseLost and ErrNotFound", cause)
	}
	got, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "b", TTL: time.Minute})
	if err != nil || got.Lease.Token <= lease.Token {
		t.Fatalf("acquire by another owner after the revoke: %v; want it taken with a token above the holder's %d", err, lease.Token)
	}
	if res, err := a.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "a", Token: lease.Token, TTL: time.Minute}); err == nil {
		t.Errorf("the former holder's renew after another owner took the key: %s; want it refused", res.Status)
	}
}
