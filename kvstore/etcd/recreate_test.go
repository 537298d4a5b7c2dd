package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestStoreRecreatedAfterDestroyBesideOtherKeys: `leasectl migrate down
// --destroy-data` leaves the keys another client put under PREFIX/k/ and
// PREFIX/a/ that are no entries of the store (TestDestroyKeepsOtherKeys,
// docs/etcd.md), and the store lived beside them; creating the store again
// at the prefix (`migrate up`, a service's first use) works beside them as
// well. It was refused as invalid, the message saying a store there would
// read and delete as its own the very keys the destroy left as not its own.
func TestStoreRecreatedAfterDestroyBesideOtherKeys(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	prefix := c.Prefix(t)
	b := open(t, &etcd.Config{Prefix: prefix})
	p := b.Prefix()
	for _, k := range []string{p + "a/notes", p + "k/notes"} {
		if _, err := b.Client().Put(ctx, k, "not leasestore's"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := protocol.New(b, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	_ = b.Close(context.Background())
	again, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatalf("create the store again under %s after destroying it, the keys it kept as not its own still there: %v; want it created", p, err)
	}
	_ = again.Close(context.Background())
}
