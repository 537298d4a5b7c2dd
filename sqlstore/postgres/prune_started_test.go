package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestFollowerStartedAfterAPruneIsNotBehindIt: while a transaction of the
// cluster older than the pruned records stays open (another application's
// session idle in transaction), a follower that starts after the prune
// (its first page oldest first, or audit.Tail) got a cursor at the
// horizon, below the ids the prune removed, and its next read failed
// "behind a prune" although it missed nothing: those records were gone
// before it first read. Both read on, and read a record written after
// them, and so do audit.Tail and a follow from the start over the HTTP API;
// a second prune, after their first read, still refuses them.
func TestFollowerStartedAfterAPruneIsNotBehindIt(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))

	idle := rawConn(t, dsn) // an older transaction that holds an xid, left open
	mustExec(t, idle, "BEGIN")
	var xid string
	if err := idle.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"k0", "k1", "k2"} {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Second, RequestID: "a" + name})
		wantStatus(t, "acquire "+name, res, err, protocol.StatusAcquired)
		if i < 2 {
			rel, err := b.Release(ctx, protocol.ReleaseRequest{Key: key(name), Owner: "w", Token: res.Lease.Token, RequestID: "r" + name})
			wantStatus(t, "release "+name, rel, err, protocol.StatusReleased)
		}
	}
	all, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: audit.MaxLimit})
	if err != nil || len(all.Records) != 5 {
		t.Fatalf("trail of ns: %+v, %v; want 5 records", all.Records, err)
	}
	through := all.Records[4].ID
	clock.Advance(time.Minute)
	prune := func(id string) {
		t.Helper()
		if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: id}); err != nil {
			t.Fatalf("prune %s: %v", id, err)
		}
	}
	prune("prune-1")

	first, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true})
	if err != nil || len(first.Records) != 0 {
		t.Fatalf("a follower's first page after the prune: %+v, %v; want no record", first, err)
	}
	fromPage := first.Resume("")
	fromTail, err := audit.Tail(ctx, b, audit.Query{Namespace: "ns"}, nil)
	if err != nil {
		t.Fatalf("tail after the prune: %v", err)
	}
	// Over the HTTP API: audit.Tail through GET /v1/audit (leasectl watch),
	// and a follow from the start (its first page, then the stream).
	client, err := httpapi.NewClient(serveHTTP(t, b, true, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	fromHTTPTail, err := audit.Tail(ctx, client, audit.Query{Namespace: "ns"}, nil)
	if err != nil {
		t.Fatalf("tail over HTTP after the prune: %v", err)
	}
	started, followed := make(chan struct{}), make(chan string, 1)
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	go func() {
		once := false
		for rec, err := range client.FollowPositions(fctx, audit.Query{Namespace: "ns"}, func(string) {
			if !once {
				once = true
				close(started)
			}
		}) {
			if err != nil {
				followed <- "error: " + err.Error()
			} else {
				followed <- rec.RequestID
			}
			return
		}
		followed <- "the follow ended"
	}()
	select {
	case <-started: // its first page was read, the open transaction holding the horizon
	case s := <-followed:
		t.Fatalf("follow over HTTP from the start: %s before its first page told where it read on from", s)
	}
	for _, c := range []string{fromPage, fromTail, fromHTTPTail} {
		// The open transaction (xid xid) keeps the horizon below the ids
		// pruned: the case this test is about.
		if id, err := audit.DecodeCursor(c); err != nil || id >= through {
			t.Fatalf("cursor %q (%v) is not below the pruned id %d: transaction %s did not hold the horizon", c, err, through, xid)
		}
		if _, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true, Cursor: c}); err != nil {
			t.Fatalf("a follower that started after the prune, reading on from %q: %v; want it served: it missed nothing", c, err)
		}
	}

	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("after"), Owner: "w", TTL: time.Hour, RequestID: "after"})
	wantStatus(t, "acquire after", res, err, protocol.StatusAcquired)
	mustExec(t, idle, "ROLLBACK")
	if got := <-followed; got != "after" {
		t.Fatalf("follow over HTTP from the start: %s; want the record written after it (after)", got)
	}
	for _, c := range []string{fromPage, fromTail, fromHTTPTail} {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // other tests' transactions may hold the horizon a while
		var got []string
		for rec, err := range audit.Watch(wctx, b, audit.Query{Namespace: "ns", Cursor: c}, nil) {
			if err != nil {
				t.Fatalf("watch from %q: %v", c, err)
			}
			got = append(got, rec.RequestID)
			break
		}
		cancel()
		if len(got) != 1 || got[0] != "after" {
			t.Fatalf("watch from %q: read %q; want the record written after it (after)", c, got)
		}
	}

	// A prune after the follower's first read removes a record after its
	// cursor: it is behind that one.
	clock.Advance(time.Minute)
	prune("prune-2")
	for _, c := range []string{fromPage, fromTail, fromHTTPTail} {
		page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true, Cursor: c})
		wantPruned(t, "follower at "+c+" after a second prune", page, err)
	}
}
