package etcd_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestWriteToADestroyedStoreIsRefused: once a store is destroyed
// (`leasectl migrate down --destroy-data`, Destroy) a process that still
// has it open must not go on writing leases and audit records under the
// prefix as if the store existed: its next change is refused (the store's
// format record is gone, as its Health says, naming `leasectl migrate up`)
// and writes nothing. On the SQL stores the dropped tables refuse it; here
// the acquire's transaction succeeds and brings back, under a prefix that
// `migrate status` reports as holding no store, a live lease, its audit
// record and the revision mark.
func TestWriteToADestroyedStoreIsRefused(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	running := open(t, &etcd.Config{Prefix: prefix})
	rt := protocol.New(running, nil)
	ctx := t.Context()
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("before"), Owner: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	operator := open(t, &etcd.Config{Prefix: prefix})
	if _, err := operator.Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if err := running.Health(ctx); !errors.Is(err, etcd.ErrNoStore) {
		t.Fatalf("health after the store was destroyed: %v, want ErrNoStore", err)
	}
	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("after"), Owner: "a", TTL: time.Minute})
	left, gerr := running.Client().Get(ctx, running.Prefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if gerr != nil {
		t.Fatal(gerr)
	}
	if err == nil || len(left.Kvs) != 0 {
		var keys []string
		for _, kv := range left.Kvs {
			keys = append(keys, string(kv.Key))
		}
		t.Fatalf("acquire through a Backend whose store was destroyed answered %s (err %v) and left %d keys under the prefix %q; want it refused (the store is gone: migrate up) and nothing written",
			res.Status, err, len(left.Kvs), keys)
	}
}
