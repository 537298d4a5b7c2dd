package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// planStats is what an EXPLAIN (ANALYZE[, BUFFERS], FORMAT JSON) plan
// says a statement read: rows (every node's returned rows and the rows its
// filter removed), shared blocks hit or read (summed over the leaves, whose
// counts the nodes above include, but a CTE Scan's: it counts the blocks
// of the CTE's plan that it runs, which that plan's nodes count too; zero
// without BUFFERS) and the indexes it used.
type planStats struct {
	rows, blocks int
	indexes      []string
}

func readPlan(t *testing.T, plan string) planStats {
	t.Helper()
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	var st planStats
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		for _, k := range []string{"Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"} {
			if v, ok := n[k].(float64); ok {
				st.rows += int(v)
			}
		}
		kids, _ := n["Plans"].([]any)
		if len(kids) == 0 && n["Node Type"] != "CTE Scan" {
			for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
				if v, ok := n[k].(float64); ok {
					st.blocks += int(v)
				}
			}
		}
		if ix, ok := n["Index Name"].(string); ok {
			st.indexes = append(st.indexes, ix)
		}
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(doc[0].Plan)
	return st
}

// TestListsDoNotReadSetAsideRows: a namespace of 10,000 expired rows and 3
// live leases. Before a sweep, a list of live leases reads the expired
// rows too; once the sweep has set them aside (within the grace, so none
// is removed), lists of live leases, by namespace and by owner, read only
// the live ones, and a list with expired leases still shows every row.
func TestListsDoNotReadSetAsideRows(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	mustExec(t, raw, `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
		SELECT 'ns', 'dead-' || lpad(i::text, 6, '0'), 'w' || (i % 7), i, now() - interval '2 min', now() - interval '2 min',
		       now() - interval '1 min', 1
		FROM generate_series(1, 10000) AS i`)
	mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 10000)")
	mustExec(t, raw, "ANALYZE leasestore_leases")                    // as autovacuum would
	for _, name := range []string{"dead-000100x", "live-b", "zzz"} { // among, after and well after the dead
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: "w3", TTL: time.Hour, RequestID: "a-" + name})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	live := protocol.ListRequest{Namespace: "ns"}
	byOwner := protocol.ListRequest{Namespace: "ns", Owner: "w3"}

	read := func(req protocol.ListRequest) (int, []string) {
		plan, err := b.ListPlan(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		st := readPlan(t, plan)
		return st.rows, st.indexes
	}
	if n, ix := read(live); n < 5000 {
		t.Fatalf("before the sweep the live list read %d rows through %v; want the expired ones too (the test's premise)", n, ix)
	}

	res, err := b.Sweep(t.Context(), 100000, time.Hour)
	if err != nil || res.Removed != 0 || res.SetAside != 10000 {
		t.Fatalf("sweep: %+v, %v; want 10000 set aside, none removed", res, err)
	}
	mustExec(t, raw, "ANALYZE leasestore_leases") // as autovacuum would
	for _, req := range []protocol.ListRequest{live, byOwner} {
		if n, ix := read(req); n > 50 {
			t.Errorf("list %+v read %d rows through %v after the sweep; want only the live ones", req, n, ix)
		}
		page, err := b.List(ctxT(t), req)
		if err != nil || len(page.Leases) != 3 {
			t.Fatalf("list %+v: %d leases, %v; want 3", req, len(page.Leases), err)
		}
	}
	all, err := b.List(ctxT(t), protocol.ListRequest{Namespace: "ns", IncludeExpired: true, Limit: 1000})
	if err != nil || len(all.Leases) != 1000 || all.NextCursor == "" {
		t.Fatalf("list with expired: %d leases, cursor %q, %v; want a full page and more", len(all.Leases), all.NextCursor, err)
	}
	// An expired lease set aside still answers as expired to its holder.
	res2, err := b.Renew(ctxT(t), protocol.RenewRequest{Key: key("dead-000001"), Owner: "w1", Token: 1, TTL: time.Minute, RequestID: "r1"})
	wantStatus(t, "renew of a set-aside lease", res2, err, protocol.StatusExpired)
	// Acquiring a set-aside key brings it back to the live lists, with a
	// greater token.
	res3, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("dead-000002"), Owner: "w3", TTL: time.Hour, RequestID: "a2"})
	wantStatus(t, "acquire of a set-aside key", res3, err, protocol.StatusAcquired)
	if res3.Lease.Token <= 10000 {
		t.Fatalf("token %d, want more than every earlier one", res3.Lease.Token)
	}
	if page, err := b.List(ctxT(t), byOwner); err != nil || len(page.Leases) != 4 {
		t.Fatalf("list by owner after the acquire: %d leases, %v; want 4", len(page.Leases), err)
	}
}

// TestRenewAfterSetAsideIsListed: a renew that judged the lease live by a
// clock taken before it waited on the key's lock lands after a sweeper,
// whose clock has passed the lease's expiry, set the row aside. The
// renewed lease is live and must be listed. (The old renew left the row
// set aside: get found the lease, list did not.)
func TestRenewAfterSetAsideIsListed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	before := openBackend(t, dsn, postgres.WithTestClock(nil, func() time.Time { return t0 }))
	after := openBackend(t, dsn, postgres.WithTestClock(nil, func() time.Time { return t0.Add(time.Minute) }))
	// A namespace of its own: key locks are the database's, shared with
	// every other test's schema.
	ns := pgtest.Namespace()
	key := keysIn(ns)
	res, err := before.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: 30 * time.Second, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	// Hold the key's lock so that the renew waits inside its statement.
	raw := rawPool(t, dsn)
	conn, err := raw.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	mustExec(t, conn, "SELECT pg_advisory_lock(1818583411, hashtext('"+ns+"/k'))")
	renewed := make(chan error, 1)
	go func() {
		res, err := before.Renew(context.Background(), protocol.RenewRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token,
			TTL: time.Hour, RequestID: "r"})
		if err == nil && res.Status != protocol.StatusRenewed {
			err = fmt.Errorf("renew: %s (%s)", res.Status, res.Message)
		}
		renewed <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if waitsOn(ctxT(t), conn.Conn()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the renew never waited on the key's lock")
		}
	}
	if sw, err := after.Sweep(ctxT(t), 100, time.Hour); err != nil || sw.SetAside != 1 {
		t.Fatalf("sweep while the renew waits: %+v, %v; want the expired row set aside", sw, err)
	}
	mustExec(t, conn, "SELECT pg_advisory_unlock(1818583411, hashtext('"+ns+"/k'))")
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	page, err := after.List(ctxT(t), protocol.ListRequest{Namespace: ns})
	if err != nil || len(page.Leases) != 1 {
		t.Fatalf("list after the renew: %v, %v; want the renewed lease", page.Leases, err)
	}
}

// A renew sent in a coalesced batch clears swept_token as renewSQL does,
// so a live lease the sweeper set aside (see TestRenewAfterSetAsideIsListed
// for how) is listed again after it. The keys are in a namespace of the
// test's own: a key whose lock another session holds (in another schema
// but the same lock) is busy in the batch and runs again alone, and the
// batched renew goes untested.
func TestBatchedRenewAfterSetAsideIsListed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxConns: 4, MaxInFlight: 1}))
	ns := pgtest.Namespace()
	key := keysIn(ns)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	raw := rawPool(t, dsn)
	mustExec(t, raw, "UPDATE leasestore_leases SET swept_token = token WHERE name = 'k'")
	if page, err := b.List(ctxT(t), protocol.ListRequest{Namespace: ns}); err != nil || len(page.Leases) != 0 {
		t.Fatalf("list of the set-aside row: %v, %v; want none (the test's premise)", page.Leases, err)
	}
	answers := batchOf(t, dsn, b, queuedOp{name: "renew", run: func(ctx context.Context) (protocol.Result, error) {
		return b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token, TTL: time.Hour, RequestID: "r"})
	}}, queuedOp{name: "other", run: func(ctx context.Context) (protocol.Result, error) {
		return b.Acquire(ctx, protocol.AcquireRequest{Key: key("other"), Owner: "o", TTL: time.Hour, RequestID: "o"})
	}})
	wantStatus(t, "batched renew", answers["renew"].res, answers["renew"].err, protocol.StatusRenewed)
	wantStatus(t, "batched acquire", answers["other"].res, answers["other"].err, protocol.StatusAcquired)
	if _, _, alone := postgres.CoalesceStats(b); alone != 0 {
		t.Fatalf("%d operations of the batch ran again alone: the batched renew was not tested", alone)
	}
	if page, err := b.List(ctxT(t), protocol.ListRequest{Namespace: ns, Owner: "o"}); err != nil || len(page.Leases) != 2 {
		t.Fatalf("list after the batched renew: %v, %v; want k and other", page.Leases, err)
	}
}
