package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// DESIGN.md: "a claim left by a prune whose process died keeps that id
// refused as used" (its committed batches removed records that no prune
// record counts). Migrating down past version 8 and up again drops that
// claim with its table, so the id is free again: the prune sent again with
// it runs, and its record counts only what it removed itself.
func TestAClaimLeftByADeadPruneSurvivesMigrateDownAndUp(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	path := migratedFile(t)
	b := open(t, path, clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	clock.Advance(time.Minute)
	// What a prune whose process died after its first batch leaves behind.
	raw := rawDB(t, path)
	if _, err := raw.ExecContext(ctx, `INSERT INTO leasestore_audit_prune_claim (request_id, run, actor, before, at)
		VALUES ('dead', 'run-1', 'ops', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	req := audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "dead"}
	if _, err := b.PruneAudit(ctx, req); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("prune with the dead prune's request id before migrating: %v; want invalid (used)", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	for v := migrations.LatestVersion; v > 7; v-- {
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
	pr, err := b.PruneAudit(ctx, req)
	if !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("prune with the dead prune's request id after migrate down to 7 and up: %+v, %v; "+
			"want invalid (the id is still claimed by the prune that died)", pr, err)
	}
}
