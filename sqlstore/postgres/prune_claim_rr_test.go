package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// On a borrowed pool whose sessions default to repeatable read (accepted:
// docs/postgres-settings.md says a statement that fails to serialize is run
// again), a prune A that finds nothing older than its cut-off runs one
// batch; a prune B with A's request id and a later cut-off (a retry of a
// prune --older-than) begins its first batch while A's is uncommitted. B's
// INSERT of the window waits for A, and after A commits B goes on with the
// snapshot it took before, in which neither A's record nor A's claim shows
// (A took and freed it in that one transaction), and nothing of what B
// removes conflicts with A. B claims the id, removes a full batch, and its
// next batch finds A's record: records removed that no record counts, what
// schema 8 promised away. Read committed (Open's pools) holds. Not
// parallel: it sets the batch size.
func TestPruneSameRequestIDUnderRepeatableRead(t *testing.T) {
	ctx := ctxT(t)
	dsn := withServerOption(t, pgtest.MigratedDSN(t), "default_transaction_isolation", "repeatable\\ read")
	app := appName(t)
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if got := setting(t, pool, "default_transaction_isolation"); got != "repeatable read" {
		t.Fatalf("the pool's isolation is %q; want repeatable read (the test would prove nothing)", got)
	}

	clock := contract.NewClock()
	owner := rawConn(t, dsn)
	b, err := postgres.New(ctx, pool, postgres.WithTestClock(nil, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	postgres.SetPruneBatch(t, 2)
	cutA := clock.Now() // A finds nothing older: one batch, removing none
	clock.Advance(time.Minute)
	for i := range 2 { // B's cut-off takes these: a full batch, then one more
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Hour, RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
	cutB := clock.Now()
	// Take the era's table, so that A's batch stops at its record, with
	// the window open and its claim freed, until lockTx commits.
	lockTx, err := rawConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, lockTx, "LOCK TABLE leasestore_audit_era IN ACCESS EXCLUSIVE MODE")

	type outcome struct {
		res audit.PruneResult
		err error
	}
	aDone, bDone := make(chan outcome, 1), make(chan outcome, 1)
	go func() {
		res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: cutA, Actor: "ops", RequestID: "once"})
		aDone <- outcome{res, err}
	}()
	waitForQueryWaiting(t, owner, app, "leasestore_audit_era")
	go func() {
		res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: cutB, Actor: "ops", RequestID: "once"})
		bDone <- outcome{res, err}
	}()
	waitForQueryWaiting(t, owner, app, "INSERT INTO leasestore_audit_prune (id, before)")
	if err := lockTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a, bo := <-aDone, <-bDone
	t.Logf("prune A (cut-off %s): removed %d, %v; prune B (cut-off %s): removed %d, %v",
		cutA.Format(time.RFC3339), a.res.Removed, a.err, cutB.Format(time.RFC3339), bo.res.Removed, bo.err)
	if a.err != nil || a.res.Removed != 0 {
		t.Fatalf("prune A: removed %d, %v; want none removed and recorded", a.res.Removed, a.err)
	}
	if bo.res.Removed != 0 || !errors.Is(bo.err, protocol.ErrInvalid) || !strings.Contains(bo.err.Error(), "already used") {
		t.Fatalf("prune B, same request id, begun while A's last batch was uncommitted: removed %d, %v; "+
			"want nothing removed and invalid (request id already used)", bo.res.Removed, bo.err)
	}
}

// waitForQueryWaiting waits until a connection named app waits for a lock
// in a statement containing part.
func waitForQueryWaiting(t *testing.T, c *pgx.Conn, app, part string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := c.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock' AND strpos(query, $2) > 0`, app, part).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection named %q waits for a lock in a statement with %q", app, part)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
