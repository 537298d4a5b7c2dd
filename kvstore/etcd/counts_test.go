package etcd_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestCountsCountsKeys: Counts (what `leasectl migrate down` reports and
// refuses on) counts each lease key once, however many entries it has: a
// live lease has three (four with a lock-delay), an expired one two, a
// revoked one whose lock-delay still runs one; the prune mark is no
// audit record.
func TestCountsCountsKeys(t *testing.T) {
	t.Parallel()
	b := open(t, &etcd.Config{Prefix: etcdcluster.Shared(t).Prefix(t)})
	rt := protocol.New(b, nil)
	ctx := t.Context()
	counts := func(what string, leases, records int64) {
		t.Helper()
		l, r, err := b.Counts(ctx)
		if err != nil || l != leases || r != records {
			t.Fatalf("%s: counts %d leases, %d records (%v); want %d, %d", what, l, r, err, leases, records)
		}
	}
	counts("a new store", 0, 0)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	counts("three live leases", 3, 3)
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("d"), Owner: "o", TTL: time.Minute, LockDelay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	counts("four live leases, one with a lock-delay", 4, 4)
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: key("d"), Actor: "ops", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	counts("three live leases and a lock-delay", 4, 5)
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: key("a"), Actor: "ops", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	counts("two live leases and a lock-delay", 3, 6)
	// The prune mark is no record: after a prune up to now, the prune's
	// own record is left, and the acquires of the two live leases (b and
	// c), which a prune keeps.
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"}); err != nil {
		t.Fatal(err)
	}
	counts("after a prune", 3, 3)
}

// TestCountsCountsOnlyTheStoresEntries: keys under the store's prefix
// that are no lease and no audit record of the store (an operator's note
// put beside its entries) are no lease and no record to Counts either,
// as they are none to get, list and the audit reads, which pass over
// them: `leasectl migrate down` must not refuse an empty store as one
// that "holds audit records", nor report records no read can show.
func TestCountsCountsOnlyTheStoresEntries(t *testing.T) {
	t.Parallel()
	b := open(t, &etcd.Config{Prefix: etcdcluster.Shared(t).Prefix(t)})
	ctx := t.Context()
	for _, k := range []string{b.Prefix() + "a/notes", b.Prefix() + "k/notes"} {
		if _, err := b.Client().Put(ctx, k, "not leasestore's"); err != nil {
			t.Fatal(err)
		}
	}
	page, err := b.ReadAudit(ctx, audit.Query{})
	if err != nil || len(page.Records) != 0 {
		t.Fatalf("the trail of a store with no change: %v %v; want no record", page.Records, err)
	}
	if l, r, err := b.Counts(ctx); err != nil || l != 0 || r != 0 {
		t.Fatalf("counts of a store with no lease and no record, beside two foreign keys under its prefix: %d leases, %d records (%v); want 0, 0", l, r, err)
	}
}
