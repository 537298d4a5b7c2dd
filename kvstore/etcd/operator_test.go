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

// TestForeignEtcdLeaseRevokeDoesNotEndALeaseEarly: an operator revokes the
// etcd lease the store attached a key's liveness entry to (`etcdctl lease
// list`, `etcdctl lease revoke ID`: another etcd client). docs/etcd.md:
// "The cluster never ends a lease before the expires_at its holder was
// told". Until then a get finds the lease and another owner's acquire
// answers conflict (the store may refuse at health, naming the fix, but
// must not give the key away unaudited).
func TestForeignEtcdLeaseRevokeDoesNotEndALeaseEarly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	be := open(t, &etcd.Config{Prefix: prefix})
	a := protocol.New(be, nil)
	b := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	res, err := a.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	held := *res.Lease
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
	if time.Now().After(held.ExpiresAt.Add(-10 * time.Second)) {
		t.Skip("the machine was too slow: the lease is near its expires_at")
	}
	if g, err := b.Get(ctx, protocol.GetRequest{Key: key("k")}); err != nil || g.Lease == nil || g.Lease.Token != held.Token {
		t.Errorf("get %v before the holder's expires_at, after an etcd lease revoke by another client: %s %v; want found, token %d",
			time.Until(held.ExpiresAt).Round(time.Second), g.Status, err, held.Token)
	}
	got, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "b", TTL: time.Minute})
	if !errors.Is(err, protocol.ErrConflict) {
		t.Errorf("acquire by another owner %v before the holder's expires_at, after an etcd lease revoke by another client: %s %v; want conflict",
			time.Until(held.ExpiresAt).Round(time.Second), got.Status, err)
	}
}
