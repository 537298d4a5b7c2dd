package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestWaiterOnAOneConnectionDBLeavesWritesServed gives New a *sql.DB from
// OpenDB limited to one connection (db.SetMaxOpenConns(1), the common
// advice for SQLite in Go) and subscribes to a key, as a blocking acquire
// (protocol.AcquireWait) does after its first conflict and a holder
// (protocol.WatchLease, Hold) does for as long as it holds. The
// subscription's poller (notify.go) keeps a connection of the pool to
// itself while anyone waits, so with one connection every write waits
// for a connection until its deadline: the acquire below answered
// timeout after 3s, and so would the holder's renewals, and the release
// that should wake the waiter. New must refuse such a *sql.DB (naming
// the fix), or writes must be served while someone waits.
func TestWaiterOnAOneConnectionDBLeavesWritesServed(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	b, err := sqlite.New(ctxT(t), db, nil)
	if err != nil {
		return // refused: the caller learns at New, not from timeouts
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })

	_, cancel, err := b.Subscribe(ctxT(t), key("k"))
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer cancel()
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	start := time.Now()
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "a"})
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("acquire of a free key while a waiter is subscribed, on a *sql.DB of one connection that New accepted: "+
			"%q, %v after %v; want acquired", res.Status, err, time.Since(start).Round(time.Millisecond))
	}
}

// TestWaiterAfterTheDBWasLimitedToOneConnection: New refuses a *sql.DB
// limited to one connection, but the limit is the caller's to change
// afterwards (db.SetMaxOpenConns(1) made after New). A subscription, the
// start of every wait, must then be refused, naming the fix, rather than
// let its poller keep the one connection while every write waits for it
// until its deadline; or writes must be served. A refused Subscribe costs
// a waiter its signals (protocol.AcquireWait then polls, a holder hears a
// loss at its renewals), not its writes.
func TestWaiterAfterTheDBWasLimitedToOneConnection(t *testing.T) {
	t.Parallel()
	db, err := sqlite.OpenDB(migratedFile(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b, err := sqlite.New(ctxT(t), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	db.SetMaxOpenConns(1)

	_, cancel, err := b.Subscribe(ctxT(t), key("k"))
	if err != nil {
		expectStatus(t, "Subscribe on a *sql.DB limited to one connection after New", err, protocol.StatusInvalid,
			"SetMaxOpenConns(2)")
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "a"})
		wantStatus(t, "acquire after the refused Subscribe", res, err, protocol.StatusAcquired)
		return
	}
	defer cancel()
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	start := time.Now()
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "a"})
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("acquire of a free key while a waiter is subscribed, on a *sql.DB limited to one connection after New "+
			"(Subscribe accepted it): %q, %v after %v; want acquired, or Subscribe refused naming the fix",
			res.Status, err, time.Since(start).Round(time.Millisecond))
	}
}

// TestWaiterBeforeTheDBWasLimitedToOneConnection: the limit lowered while
// a wait's poller already runs (keeping a connection of its own). Writes
// must be served all the same: the poller lets go of the connection, its
// waiters keep the signals of this Backend's own releases, and the next
// Subscribe is refused naming the fix.
func TestWaiterBeforeTheDBWasLimitedToOneConnection(t *testing.T) {
	t.Parallel()
	db, err := sqlite.OpenDB(migratedFile(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b, err := sqlite.New(ctxT(t), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ch, cancel, err := b.Subscribe(ctxT(t), key("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	db.SetMaxOpenConns(1)

	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	start := time.Now()
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "a"})
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("acquire of a free key while a waiter subscribed before the *sql.DB was limited to one connection: "+
			"%q, %v after %v; want acquired", res.Status, err, time.Since(start).Round(time.Millisecond))
	}
	select { // a signal of the poller's as it let go, if any
	case <-ch:
	default:
	}
	if _, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Error("the waiter heard no signal of a release through the same Backend")
	}
	_, cancel2, err := b.Subscribe(ctxT(t), key("k2"))
	if err == nil {
		cancel2()
	}
	expectStatus(t, "a new Subscribe", err, protocol.StatusInvalid, "SetMaxOpenConns(2)")
}
