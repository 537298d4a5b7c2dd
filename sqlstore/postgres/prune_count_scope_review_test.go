package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A counted cursor (a1.ID.PRUNES, now a1.ID.BATCH) carries the prune count of the scope
// that issued it (the whole trail's, or one namespace's), but does
// not say which scope. Handed to a read of another scope, whose count
// happens to equal it, it is served although a prune removed records of
// that scope after its position since it was issued: the reader silently
// skips them. The rule of migration 7 (a cursor below the greatest id
// pruned is behind the prune) refused it.
func TestCountedCursorOfAnotherScopeIsStillBehindAPrune(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	inA, inB := keysIn("a"), keysIn("b")

	idle := rawConn(t, dsn) // holds the horizon below every record below
	mustExec(t, idle, "BEGIN")
	mustExec(t, idle, "SELECT pg_current_xact_id()")
	defer mustExec(t, idle, "ROLLBACK")

	prune := func(id string) {
		t.Helper()
		clock.Advance(time.Minute)
		if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: id}); err != nil {
			t.Fatalf("prune %s: %v", id, err)
		}
	}
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: inB("k"), Owner: "w", TTL: time.Second, RequestID: "b1"})
	wantStatus(t, "acquire b/k", res, err, protocol.StatusAcquired)
	prune("prune-b") // removes b's record: counts '' and b, not a

	// A whole-trail follower starts after that prune: its cursor is at the
	// horizon, below what the prune removed, and carries the trail's count.
	first, err := b.ReadAudit(ctx, audit.Query{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	c := first.Resume("")
	n, counted := audit.CursorPrunedBy(c)
	if !counted {
		t.Fatalf("whole-trail follower's cursor %q carries no count: the horizon was not held", c)
	}

	// Records of namespace a after that cursor, then a prune that removes them.
	res, err = b.Acquire(ctx, protocol.AcquireRequest{Key: inA("k"), Owner: "w", TTL: time.Second, RequestID: "a1"})
	wantStatus(t, "acquire a/k", res, err, protocol.StatusAcquired)
	prune("prune-a")

	// With counts, namespace a's (1) equalled the cursor's (the trail's
	// 1); a batch's id never repeats, so a's mark now names prune-a's
	// batch and a per-namespace comparison would refuse too: what the
	// cursor must carry is the trail's mark, which prune-a moved on.
	var aThrough, aBy, trailBy int64
	if err := idle.QueryRow(ctx, "SELECT through, pruned_by FROM leasestore_audit_pruned WHERE namespace = 'a'").Scan(&aThrough, &aBy); err != nil {
		t.Fatal(err)
	}
	if err := idle.QueryRow(ctx, "SELECT pruned_by FROM leasestore_audit_pruned WHERE namespace = ''").Scan(&trailBy); err != nil {
		t.Fatal(err)
	}
	if at, _ := audit.DecodeCursor(c); aThrough <= at || aBy != trailBy || trailBy == n {
		t.Fatalf("setup: namespace a pruned through %d by batch %d, the trail by batch %d; want a record of a after cursor %q removed by the trail's last batch", aThrough, aBy, trailBy, c)
	}
	// Namespace a's record after c was pruned since c was issued: a read of
	// a from c is behind that prune.
	for _, follow := range []bool{false, true} {
		page, err := b.ReadAudit(ctx, audit.Query{Namespace: "a", Follow: follow, Cursor: c})
		wantPruned(t, "namespace a read from the whole trail's counted cursor "+c, page, err)
	}
}
