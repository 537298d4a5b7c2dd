package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// Migrate down of 11 drops the prune counts, and up again starts them at
// 0: a count a follower's cursor (a1.ID.PRUNES, now a1.ID.BATCH) carries from before is
// reached again by the prunes after, and the read from it is served
// although a prune after it removed records it had not read. Here the
// cursor carries 1 (one prune before it), down and up reset the count to
// 0, and the one prune after sets it to 1 again: the follower silently
// skips the record that prune removed.
func TestPruneCountAfterMigrateDownAndUpDoesNotMatchAnOlderCursor(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	prune := func(id string) {
		t.Helper()
		clock.Advance(time.Minute)
		if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: id}); err != nil {
			t.Fatalf("prune %s: %v", id, err)
		}
	}

	idle := rawConn(t, dsn) // an older transaction that holds the horizon, left open
	mustExec(t, idle, "BEGIN")
	mustExec(t, idle, "SELECT pg_current_xact_id()")
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k0"), Owner: "w", TTL: time.Second, RequestID: "k0"})
	wantStatus(t, "acquire k0", res, err, protocol.StatusAcquired)
	prune("prune-1")
	first, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	c := first.Resume("")
	var trailBy int64
	if err := idle.QueryRow(ctx, "SELECT pruned_by FROM leasestore_audit_pruned WHERE namespace = ''").Scan(&trailBy); err != nil {
		t.Fatal(err)
	}
	if n, counted := audit.CursorPrunedBy(c); !counted || n != trailBy || n == 0 {
		t.Fatalf("the follower's first cursor %q: want it to carry prune-1's batch %d (the horizon held)", c, trailBy)
	}
	mustExec(t, idle, "ROLLBACK")

	// A record after the follower's cursor, which it has not read.
	res, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("k1"), Owner: "w", TTL: time.Second, RequestID: "k1"})
	wantStatus(t, "acquire k1", res, err, protocol.StatusAcquired)

	p, err := migrations.NewProvider(ctx, migrations.Postgres, sqlDB(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 10); err != nil {
		t.Fatalf("migrate down to 10: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}

	prune("prune-2") // removes k1's record, after the follower's cursor
	page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true, Cursor: c})
	wantPruned(t, "follower at "+c+" after migrate down, up and a prune of a record after it", page, err)
}
