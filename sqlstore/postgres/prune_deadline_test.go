package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A prune waits for the window of another prune (the row of
// leasestore_audit_prune its batch's transaction holds) before each of
// its batches. One whose deadline passed meanwhile answered some five
// seconds later: before its first batch it went on to free a claim on its
// request id that it never took (the batch rolled back before claiming
// anything), and after it, to free the claim its first batch took, each
// in a transaction of its own that waited for the same window up to the
// claim-freeing bound; the claim a first batch took then stayed, refusing
// the request id as used. A prune cut off so must answer timeout within a
// second of its deadline, saying what it removed, and leave no claim once
// the other prune is done and its Backend closed, so that the prune sent
// again with its request id runs and removes the rest. Not parallel: it
// sets the package's batch size.
func TestPruneCutOffWhileWaitingForTheWindowAnswersAtItsDeadline(t *testing.T) {
	for _, c := range []struct {
		name    string
		removed int64 // the batches before the wait: 0, or the first
	}{
		{"before its first batch", 0},
		{"after its first batch", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			dsn := pgtest.MigratedDSN(t)
			clock := contract.NewClock()
			other := rawConn(t, dsn)
			var tx pgx.Tx
			hold := func() { // another prune's batch in progress: its transaction holds the window
				var err error
				if tx, err = other.Begin(ctx); err != nil {
					t.Error(err)
					return
				}
				if _, err := tx.Exec(ctx, "INSERT INTO leasestore_audit_prune (id, before) VALUES (1, $1)",
					clock.Now().Add(-time.Hour)); err != nil {
					t.Error(err)
				}
			}
			between := func() {}
			if c.removed > 0 {
				between = func() {
					if tx == nil {
						hold()
					}
				}
			}
			b, err := postgres.Open(ctx, dsn, postgres.WithPruneBatchHook(postgres.WithTestClock(nil, clock.Now), func() { between() }))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = b.Close(context.Background())
				}
			})
			postgres.SetPruneBatch(t, 2)
			acquireKeys(t, b, key, 7, time.Second)
			clock.Advance(time.Minute)
			if c.removed == 0 {
				hold()
			}

			const deadline = 500 * time.Millisecond
			req := audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "p1"}
			pctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			res, err := b.PruneAudit(pctx, req)
			if took := time.Since(start); took > deadline+time.Second {
				t.Fatalf("a prune whose deadline (%v) passed while another prune held the window answered after %v: "+
					"removed %d, %v; want an answer within 1s of its deadline", deadline, took.Round(time.Millisecond), res.Removed, err)
			}
			wantErrStatus(t, "a prune whose deadline passed while another prune held the window", err, protocol.StatusTimeout)
			if res.Removed != c.removed || (c.removed > 0 && !strings.Contains(err.Error(), "removed 2 records")) {
				t.Fatalf("the prune cut off says it removed %d records: %v; want %d, said in its error", res.Removed, err, c.removed)
			}

			if tx == nil {
				t.Fatal("the window was never held")
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			closed = true
			if n := count(t, other, "SELECT count(*) FROM leasestore_audit_prune_claim"); n != 0 {
				t.Fatalf("the prune cut off left %d claims once the other prune was done and its Backend closed", n)
			}
			again := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
			res, err = again.PruneAudit(ctx, req)
			if err != nil || res.Removed != 7-c.removed {
				t.Fatalf("the prune sent again with its request id once the window was free: removed %d, %v; want the %d "+
					"records left", res.Removed, err, 7-c.removed)
			}
		})
	}
}
