package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A namespace default of the lock-delay for "*" is documented as every
// namespace (Config.LockDelays: `"*" for all`; docs/http-api.md:
// `--lock-delay billing=0s --lock-delay '*=15s'`: every namespace but
// billing). Namespaces may hold '/' (Key.String escapes it as %2F), and a
// glob matched with path.Match stops at '/': a namespace default meant for
// all namespaces must reach those too, or their leases silently get no
// lock-delay.
func TestLockDelayDefaultForAllReachesNamespacesWithASlash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{
		{Namespaces: "billing", Delay: 0},
		{Namespaces: "*", Delay: 15 * time.Second},
	}})
	defer rt.Close(ctx)
	for _, c := range []struct {
		ns   string
		want time.Duration
	}{
		{"jobs", 15 * time.Second},
		{"billing", 0},
		{"team/a", 15 * time.Second},
		{"scans/eu/west", 15 * time.Second},
	} {
		k := protocol.Key{Namespace: c.ns, Name: "k"}
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute})
		if err != nil {
			t.Fatalf("acquire %s: %v", k, err)
		}
		if got := res.Lease.LockDelay; got != c.want {
			t.Errorf("acquire %s under the namespace default \"*\"=15s (billing=0s) got lock-delay %v, want %v", k, got, c.want)
		}
	}
}
