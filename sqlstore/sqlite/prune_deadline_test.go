package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A prune's batch waits for the file's write lock, which another
// connection (another process's prune, an operator's sqlite3 shell) may
// hold. One whose deadline passed meanwhile answered some five seconds
// later: before its first batch it went on to free a claim on its request
// id that it never took (the batch was never run), and after it, to free
// the claim its first batch took, each in a write of its own that waited
// for the same lock up to the claim-freeing bound; the claim a first batch
// took then stayed, refusing the request id as used. A prune cut off so
// must answer timeout within a second of its deadline, saying what it
// removed, and leave no claim once the lock is free and its Backend
// closed, so that the prune sent again with its request id runs and
// removes the rest. The PostgreSQL backend's twin waits for another
// prune's window. Not parallel: it sets the package's batch size.
func TestPruneCutOffWhileWaitingForTheWriteLockAnswersAtItsDeadline(t *testing.T) {
	for _, c := range []struct {
		name    string
		removed int64 // the batches before the wait: 0, or the first
	}{
		{"before its first batch", 0},
		{"after its first batch", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			path := migratedFile(t)
			clock := newClock()
			other := rawDB(t, path)
			var tx *sql.Tx
			hold := func() { // another connection's write transaction holds the write lock
				var err error
				if tx, err = other.BeginTx(ctx, nil); err != nil {
					t.Error(err)
					return
				}
				if _, err := tx.ExecContext(ctx, "DELETE FROM leasestore_leases WHERE name = 'none'"); err != nil {
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
			b, err := sqlite.Open(ctx, path, sqlite.WithPruneBatchHook(sqlite.WithTestClock(nil, clock.Now), func() { between() }))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = b.Close(context.Background())
				}
			})
			sqlite.SetPruneBatch(t, 2)
			for i := range 7 {
				res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Second,
					RequestID: fmt.Sprint("a", i)})
				wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			}
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
				t.Fatalf("a prune whose deadline (%v) passed while another connection held the write lock answered after %v: "+
					"removed %d, %v; want an answer within 1s of its deadline", deadline, took.Round(time.Millisecond), res.Removed, err)
			}
			expectStatus(t, "a prune whose deadline passed while another connection held the write lock", err, protocol.StatusTimeout)
			if res.Removed != c.removed || (c.removed > 0 && !strings.Contains(err.Error(), "removed 2 records")) {
				t.Fatalf("the prune cut off says it removed %d records: %v; want %d, said in its error", res.Removed, err, c.removed)
			}

			if tx == nil {
				t.Fatal("the write lock was never held")
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			closed = true
			var claims int
			if err := other.QueryRowContext(ctx, "SELECT count(*) FROM leasestore_audit_prune_claim").Scan(&claims); err != nil {
				t.Fatal(err)
			}
			if claims != 0 {
				t.Fatalf("the prune cut off left %d claims once the write lock was free and its Backend closed", claims)
			}
			res, err = open(t, path, clock).PruneAudit(ctx, req)
			if err != nil || res.Removed != 7-c.removed {
				t.Fatalf("the prune sent again with its request id once the write lock was free: removed %d, %v; want the %d "+
					"records left", res.Removed, err, 7-c.removed)
			}
		})
	}
}
