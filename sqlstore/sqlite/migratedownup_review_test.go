package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A follower's cursor below what a prune removed is refused (DESIGN.md: a
// follower paging by cursor never skips a record; leasestore_audit_pruned
// keeps the mark). Migrating down past version 7 and up again (an operator
// rolling a release back and forward) drops and re-creates that table
// empty, so the same cursor then reads on past the pruned records without
// an error: the follower skips them silently.
func TestPruneMarkSurvivesMigrateDownAndUp(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	path := migratedFile(t)
	b := open(t, path, clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	q := audit.Query{Namespace: "ns", Follow: true}
	page, err := b.ReadAudit(ctx, q)
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	q.Cursor = audit.EncodeCursor(page.Records[0].ID)
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
	_, err = b.ReadAudit(ctx, q)
	wantPruned(t, "follower at "+q.Cursor+" before migrating", audit.Page{}, err)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	for v := migrations.LatestVersion; v > 6; v-- {
		if _, err := migrations.Down(ctx, migrations.SQLite, db); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
	}
	if _, err := migrations.Up(context.Background(), migrations.SQLite, db); err != nil {
		t.Fatalf("up: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	b = open(t, path, clock)
	next, err := b.ReadAudit(ctx, q)
	if err == nil {
		t.Fatalf("follower at %s after migrate down to 6 and up: page %+v, no error; "+
			"want it refused as behind a prune (the renews it never read are gone without a trace)", q.Cursor, next.Records)
	}
	wantPruned(t, "follower at "+q.Cursor+" after migrate down and up", next, err)
}
