package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/prunerace"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestPruneSameRequestIDBetweenBatches is the SQLite test's twin: a prune
// of several batches is held between its first and second batch (outside
// any transaction), and a prune with the same request id runs meanwhile.
// Exactly one of them removes records, and its record (the only prune
// record under that id) counts every record removed; the other removes
// nothing and is refused as a use of the id. Before, the second passed the
// look-up of the id, removed the rest and recorded only those, and the
// first then failed on the request id's unique constraint, answering
// invalid ("already used") having removed its first batch, which no record
// counted. Not parallel: it sets the package's batch size.
func TestPruneSameRequestIDBetweenBatches(t *testing.T) {
	b, gate, clock := heldPruneStore(t, pgtest.MigratedDSN(t))
	prunerace.Run(t, ctxT(t), b, b, gate, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-once"}, heldPruneRecords)
}

// TestPruneCutOffFreesItsRequestID is the SQLite test's twin: a prune
// whose context ends between its batches frees its claim on the request
// id, so that the prune sent again with that id runs and removes the rest.
// Not parallel: it sets the package's batch size.
func TestPruneCutOffFreesItsRequestID(t *testing.T) {
	b, gate, clock := heldPruneStore(t, pgtest.MigratedDSN(t))
	prunerace.RunCutOff(t, ctxT(t), b, gate, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-cut-off"}, heldPruneRecords, 2)
}

// TestPruneThatDiedKeepsItsRequestIDUsed is the SQLite test's twin: a
// prune whose pool is closed under it after its first batch (as when its
// process dies) leaves its claim, and a prune with that request id from
// another pool is refused as a use of the id, removing nothing. Not
// parallel: it sets the package's batch size.
func TestPruneThatDiedKeepsItsRequestIDUsed(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	b, gate, clock := heldPruneStore(t, dsn)
	other := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	prunerace.RunAbandoned(t, ctxT(t), b, other, gate, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-died"},
		func() { _ = b.Close(context.Background()) })
}

// heldPruneRecords is how many records heldPruneStore writes.
const heldPruneRecords = 7

// heldPruneStore opens dsn with a manual clock and a prune batch of 2
// records, a prune held by the returned gate after its first batch, and
// writes heldPruneRecords records older than the clock's time.
func heldPruneStore(t *testing.T, dsn string) (*postgres.Backend, *prunerace.Gate, *contract.Clock) {
	t.Helper()
	ctx := ctxT(t)
	clock := contract.NewClock()
	gate := prunerace.NewGate()
	b := openBackend(t, dsn, postgres.WithPruneBatchHook(postgres.WithTestClock(nil, clock.Now), gate.Between))
	postgres.SetPruneBatch(t, 2)
	for i := range heldPruneRecords {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Second, RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
	return b, gate, clock
}

// A row of the prune window committed between a prune's batches (a DBA's,
// by hand; see TestCommittedPruneWindowIsRefused) stops the prune at its
// next batch, which removes nothing: the prune answers unavailable naming
// the row and the fix, having removed its first batch, and frees its
// request id, leaving the row as the DBA committed it. Before, the next
// batch took the row over and deleted it with its own window. Once the
// row is deleted, the prune sent again with its id removes the rest. Not
// parallel: it sets the package's batch size.
func TestPruneStopsAtAWindowCommittedBetweenBatches(t *testing.T) {
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	owner := rawConn(t, dsn)
	committed := false
	b := openBackend(t, dsn, postgres.WithPruneBatchHook(postgres.WithTestClock(nil, clock.Now), func() {
		if !committed {
			committed = true
			mustExec(t, owner, "INSERT INTO leasestore_audit_prune (id, before) VALUES (1, $1)", clock.Now())
		}
	}))
	postgres.SetPruneBatch(t, 2)
	for i := range 5 {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Second, RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
	req := audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "p1"}
	res, err := b.PruneAudit(ctx, req)
	if err == nil {
		t.Fatalf("prune with a window committed after its first batch: %+v, no error", res)
	}
	wantRefused(t, "prune with a window committed after its first batch", err, "DELETE FROM leasestore_audit_prune")
	if n := count(t, owner, "SELECT count(*) FROM leasestore_audit WHERE op <> 'prune'"); res.Removed != 2 || n != 3 {
		t.Fatalf("the stopped prune removed %d records, the trail holds %d of 5; want its first batch of 2 gone", res.Removed, n)
	}
	if n := count(t, owner, "SELECT count(*) FROM leasestore_audit WHERE op = 'prune'"); n != 1 {
		t.Fatalf("the stopped prune left %d prune records; want 1, its first batch's", n)
	}
	if n := count(t, owner, "SELECT count(*) FROM leasestore_audit_prune"); n != 1 {
		t.Fatalf("the stopped prune left %d rows of the DBA's window, want it untouched", n)
	}
	if n := count(t, owner, "SELECT count(*) FROM leasestore_audit_prune_claim"); n != 0 {
		t.Fatalf("the stopped prune left %d claims", n)
	}
	mustExec(t, owner, "DELETE FROM leasestore_audit_prune")
	res, err = b.PruneAudit(ctx, req)
	if err != nil || res.Removed != 3 {
		t.Fatalf("the prune sent again after the row was deleted: %+v, %v; want the other 3 records removed", res, err)
	}
}
