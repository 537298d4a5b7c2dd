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

// TestNewestAuditPageKeepsThePruneRecord: a prune's own record is written
// in the same transaction as the marks of what it removed
// (PREFIX/a/\x01prune, \x01pruned\x01, \x01pruned\x01NS), so they share its
// create revision, the record's id. Reading the whole trail newest first,
// auditRows asks for ranges of 500 entries sorted by create revision and
// starts each next range below the create revision of the last entry of
// the previous one, whatever that entry was: when the range ends on one of
// those marks, the record of the same revision, still to come, is never
// read. With 498 records after the prune, the page of the whole trail
// leaves out the prune's record (DESIGN: the prune "is itself recorded";
// a reader of the trail never skips a record).
func TestNewestAuditPageKeepsThePruneRecord(t *testing.T) {
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
	pr, err := b.PruneAudit(ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: "prune-1"})
	if err != nil || pr.Removed != 3 {
		t.Fatalf("prune: %+v %v, want 3 removed", pr, err)
	}
	const after = 498
	for i := range after {
		acquire(fmt.Sprint("k", i))
	}
	page, err := b.ReadAudit(ctx, audit.Query{Limit: audit.MaxLimit, Newest: true})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range page.Records {
		found = found || rec.ID == pr.Record.ID
	}
	if !found || len(page.Records) != after+1 {
		t.Fatalf("newest-first page of the whole trail: %d records, the prune's record (id %d) among them: %v; want all %d, the prune's record too",
			len(page.Records), pr.Record.ID, found, after+1)
	}
}
