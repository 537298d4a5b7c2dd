package etcd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestPruneRemovesAnOlderPrunesRecord: a prune's record shares its create
// revision with the marks its transaction first wrote (PREFIX/a/\x01prune,
// \x01pruned\x01, \x01pruned\x01NS). A later prune reads the trail oldest
// first in ranges of 500 entries sorted by create revision; when a range
// ends among those entries, the rest of them must still be read, so that
// the older prune's record, past its cut, is removed with the others.
func TestPruneRemovesAnOlderPrunesRecord(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	b := open(t, clockJudged(&etcd.Config{Prefix: c.Prefix(t)}))
	acquire := func(name string) {
		t.Helper()
		// Leases of a millisecond, ended by the prunes: a prune keeps a
		// live lease's acquire.
		if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Millisecond, RequestID: "acquire-" + name}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		acquire(fmt.Sprint("old", i))
	}
	time.Sleep(30 * time.Millisecond)
	cut := time.Now()
	time.Sleep(30 * time.Millisecond)
	const before = 499 // the next prune's first range ends on the first entry of the older prune's revision
	for i := range before {
		acquire(fmt.Sprint("k", i))
	}
	first, err := b.PruneAudit(ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: "prune-1"})
	if err != nil || first.Removed != 3 {
		t.Fatalf("prune: %+v %v, want 3 removed", first, err)
	}
	for i := range 3 {
		acquire(fmt.Sprint("new", i))
	}
	time.Sleep(30 * time.Millisecond)
	second, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune-2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(before + 1 + 3); second.Removed != want {
		t.Fatalf("second prune removed %d records; want %d: the %d records before the first prune, its own record (id %d) and the 3 after",
			second.Removed, want, before, first.Record.ID)
	}
}
