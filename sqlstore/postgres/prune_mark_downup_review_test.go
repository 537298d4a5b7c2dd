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

// A follower's cursor below what a prune removed is refused
// (leasestore_audit_pruned, schema 7). Migrating down past 7 and up again
// drops and re-creates that table empty, so the same cursor then reads on
// past the pruned records without an error: the follower skips them.
func TestPruneMarkSurvivesMigrateDownPast7AndUp(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	// A follower's read holds records back while an older transaction of
	// the shared cluster (another test's) is open: read on, as a follower does.
	first, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true})
	for deadline := time.Now().Add(opTimeout); err == nil && len(first.Records) == 0 && first.HeldBack &&
		time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		first, err = b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true})
	}
	if err != nil || len(first.Records) != 1 {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	q := audit.Query{Namespace: "ns", Follow: true, Cursor: audit.EncodeCursor(first.Records[0].ID)}
	for i := range 3 {
		clock.Advance(time.Second)
		r, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: time.Hour,
			RequestID: "r" + string(rune('0'+i))})
		wantStatus(t, "renew", r, err, protocol.StatusRenewed)
	}
	clock.Advance(time.Minute)
	later, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("later"), Owner: "w", TTL: time.Hour, RequestID: "l"})
	wantStatus(t, "acquire later", later, err, protocol.StatusAcquired)
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"}); err != nil {
		t.Fatal(err)
	}
	page, err := b.ReadAudit(ctx, q)
	wantPruned(t, "follower at "+q.Cursor+" before migrating", page, err)

	p, err := migrations.NewProvider(ctx, migrations.Postgres, sqlDB(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 6); err != nil {
		t.Fatalf("migrate down to 6: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	page, err = b.ReadAudit(ctx, q)
	if err == nil {
		t.Fatalf("follower at %s after migrate down to 6 and up: records %+v, no error; "+
			"want it refused as behind a prune (the renews it never read are gone)", q.Cursor, page.Records)
	}
	wantPruned(t, "follower at "+q.Cursor+" after migrate down to 6 and up", page, err)
}
