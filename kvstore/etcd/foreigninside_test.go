package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestReleaseKeepsForeignKeysInsideTheLeasesPrefix: a key another client
// put among a lease's entries (PREFIX/k/NS\0NAME\0note, no entry of the
// store) is that client's: destroying the store keeps it
// (TestDestroyKeepsOtherKeys), and so must releasing the lease, which
// deletes the lease's own entries only.
func TestReleaseKeepsForeignKeysInsideTheLeasesPrefix(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	b := open(t, &etcd.Config{Prefix: c.Prefix(t)})
	a, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "o", TTL: time.Minute, LockDelay: time.Minute, RequestID: "acquire-b"})
	if err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	note := b.Prefix() + "k/ns\x00b\x00note"
	if _, err := b.Client().Put(ctx, note, "not leasestore's"); err != nil {
		t.Fatal(err)
	}
	r, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("b"), Owner: "o", Token: a.Lease.Token, RequestID: "release-b"})
	if err != nil || r.Status != protocol.StatusReleased {
		t.Fatalf("release: %v %v", r.Status, err)
	}
	left, err := b.Client().Get(ctx, b.Prefix()+"k/ns\x00b\x00", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range left.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if len(keys) != 1 || keys[0] != note {
		t.Fatalf("after the release, the lease's prefix holds %q; want only the other client's key %q (the lease's entries gone, that key kept)", keys, note)
	}
}

// TestKeyReadsBesideForeignKeysInsideALeaseStayBounded: a get, an
// acquire's conflict and a renewal read the key's entries; with another
// client's keys under the key's prefix (here 2,000 of 1 KiB) they must
// read those entries only, not every key under the prefix in one
// response, which a client that caps its responses at 1 MiB (a common
// clientv3.Config.MaxCallRecvMsgSize) refuses.
func TestKeyReadsBesideForeignKeysInsideALeaseStayBounded(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	prefix := c.Prefix(t)
	b := cappedStore(t, c, prefix)
	a, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "o", TTL: time.Minute, RequestID: "acquire-b"})
	if err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	putForeignInside(t, c, b.Prefix()+"k/ns\x00b\x00", 2000)
	const want = "; want it answered, reading the lease's entries only, beside 2,000 foreign keys of 1 KiB under its prefix, on a client taking responses up to 1 MiB"
	if g, err := b.Get(ctx, protocol.GetRequest{Key: key("b")}); err != nil || g.Status != protocol.StatusFound {
		t.Errorf("get: %v %v"+want, g.Status, err)
	}
	if r, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "p", TTL: time.Minute, RequestID: "acquire-b-p"}); err != nil || r.Status != protocol.StatusConflict {
		t.Errorf("acquire by another owner: %v %v (conflict wanted)"+want, r.Status, err)
	}
	fresh := cappedStore(t, c, prefix) // no cached state: the renewal reads the key first
	if r, err := fresh.Renew(ctx, protocol.RenewRequest{Key: key("b"), Owner: "o", Token: a.Lease.Token, TTL: time.Minute, RequestID: "renew-b"}); err != nil || r.Status != protocol.StatusRenewed {
		t.Errorf("renew through another handle: %v %v"+want, r.Status, err)
	}
}

// cappedStore opens the store under prefix on a client of its own that
// takes responses up to 1 MiB (New); the test closes both.
func cappedStore(t *testing.T, c *etcdcluster.Cluster, prefix string) *etcd.Backend {
	t.Helper()
	capped, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
		MaxCallRecvMsgSize: 1 << 20, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = capped.Close() })
	b, err := etcd.New(t.Context(), capped, &etcd.Config{Prefix: prefix})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// putForeignInside puts n keys of another client, of 1 KiB each, under
// base (a lease's prefix), sorting between its liveness and owner entries.
func putForeignInside(t *testing.T, c *etcdcluster.Cluster, base string, n int) {
	t.Helper()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	value := strings.Repeat("x", 1024)
	for i := 0; i < n; i += 100 {
		var puts []clientv3.Op
		for j := i; j < min(i+100, n); j++ {
			puts = append(puts, clientv3.OpPut(fmt.Sprintf("%sf%05d", base, j), value))
		}
		if _, err := cli.Txn(t.Context()).Then(puts...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
}
