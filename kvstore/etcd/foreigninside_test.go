package etcd_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
