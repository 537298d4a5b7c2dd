package etcd_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestEveryChangeToADestroyedStoreIsRefused: beside acquire
// (TestWriteToADestroyedStoreIsRefused), every change of a Backend whose
// store another handle destroyed fails matching etcd.ErrNoStore (status
// unavailable, naming `leasectl migrate up`) and leaves the prefix empty:
// renew, release and revoke of a lease the Backend holds (its cached
// state) and of one it never saw, RenewMany, an acquire with a
// lock-delay, a sweep and an audit prune (whose last transaction writes
// the prune's own record, even when it removes nothing).
func TestEveryChangeToADestroyedStoreIsRefused(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	running := open(t, &etcd.Config{Prefix: prefix})
	ctx := t.Context()
	held, err := running.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "a", TTL: time.Minute, RequestID: "r1"})
	if err != nil || held.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %+v %v", held, err)
	}
	tok := held.Lease.Token
	if _, err := open(t, &etcd.Config{Prefix: prefix}).Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	empty := func(what string) {
		t.Helper()
		left, err := running.Client().Get(ctx, running.Prefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		if len(left.Kvs) != 0 {
			var keys []string
			for _, kv := range left.Kvs {
				keys = append(keys, string(kv.Key))
			}
			t.Fatalf("%s in a destroyed store left %d keys under the prefix: %q", what, len(left.Kvs), keys)
		}
	}
	refused := func(what string, res any, err error) {
		t.Helper()
		if !errors.Is(err, etcd.ErrNoStore) || !errors.Is(err, protocol.ErrUnavailable) {
			t.Errorf("%s in a destroyed store: %+v, %v; want unavailable matching ErrNoStore", what, res, err)
		} else if !contains(err, "leasectl migrate up") {
			t.Errorf("%s in a destroyed store: %v; want the fix named (leasectl migrate up)", what, err)
		}
		empty(what)
	}
	for _, k := range []string{"held", "never-seen"} {
		res, err := running.Renew(ctx, protocol.RenewRequest{Key: key(k), Owner: "a", Token: tok, TTL: time.Minute, RequestID: "renew-" + k})
		refused("renew of "+k, res, err)
		res, err = running.Release(ctx, protocol.ReleaseRequest{Key: key(k), Owner: "a", Token: tok, RequestID: "release-" + k})
		refused("release of "+k, res, err)
		res, err = running.Revoke(ctx, protocol.RevokeRequest{Key: key(k), Actor: "op", Reason: "test", RequestID: "revoke-" + k})
		refused("revoke of "+k, res, err)
	}
	many, err := running.RenewMany(ctx, []protocol.RenewRequest{{Key: key("held"), Owner: "a", Token: tok, TTL: time.Minute, RequestID: "many"}})
	refused("renew-many", many, err)
	res, err := running.Acquire(ctx, protocol.AcquireRequest{Key: key("delayed"), Owner: "a", TTL: time.Minute, LockDelay: time.Minute, RequestID: "r2"})
	refused("acquire with a lock-delay", res, err)
	if _, err := running.Sweep(ctx, 100, 0); err != nil && !errors.Is(err, etcd.ErrNoStore) {
		t.Errorf("sweep in a destroyed store: %v", err)
	}
	empty("sweep")
	pr, err := running.PruneAudit(ctx, audit.PruneRequest{Before: time.Now().Add(-time.Second), Actor: "op", RequestID: "prune"})
	refused("audit prune", pr, err)
}
