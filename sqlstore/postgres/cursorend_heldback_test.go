package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// TestCursorsOfRecordsHeldBackAreNotPastTheEnd: while a transaction of the
// cluster older than some committed records is open, followers read below
// it (the records are held back), but a plain read returns them, and its
// cursors lie above every position a follower is told. Such cursors, the
// follower's positions and the end of the trail are this store's: a
// follower's read and a watch's start from each are taken, not refused as
// past the end of the trail (audit.CheckCursorEnd), and a cursor beyond
// every id the store can have given is refused.
func TestCursorsOfRecordsHeldBackAreNotPastTheEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	acquire := func(name string) {
		t.Helper()
		key := protocol.Key{Namespace: "w", Name: name}
		if res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "o", TTL: time.Hour}); err != nil {
			t.Fatalf("acquire %s: %+v, %v", key, res, err)
		}
	}
	acquire("before")
	conn := rawConn(t, dsn)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	acquire("held-1")
	acquire("held-2")

	plain, err := b.ReadAudit(ctx, audit.Query{Namespace: "w"})
	if err != nil || len(plain.Records) != 3 {
		t.Fatalf("plain read: %d records, %v; want the three", len(plain.Records), err)
	}
	follower, err := b.ReadAudit(ctx, audit.Query{Namespace: "w", Follow: true})
	if err != nil || !follower.HeldBack {
		t.Fatalf("follower's read: %+v, %v; want records held back", follower, err)
	}
	tail, err := audit.Tail(ctx, b, audit.Query{Namespace: "w"}, nil)
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	last := plain.Records[2].ID
	for _, c := range []string{audit.EncodeCursor(last), audit.EncodeCursor(plain.Records[1].ID), follower.FollowCursor, tail} {
		if _, err := b.ReadAudit(ctx, audit.Query{Namespace: "w", Cursor: c, Follow: true}); err != nil {
			t.Errorf("a follower's read from %s (records held back, up to %d): %v", c, last, err)
		}
		if _, err := audit.Start(ctx, b, audit.Query{Namespace: "w", Cursor: c}, nil); err != nil {
			t.Errorf("a watch's start from %s (records held back, up to %d): %v", c, last, err)
		}
	}
	past := audit.EncodeCursor(last + 1<<40)
	if _, err := b.ReadAudit(ctx, audit.Query{Namespace: "w", Cursor: past, Follow: true}); protocol.StatusOf(err) != protocol.StatusInvalid {
		t.Errorf("a follower's read from %s: %v; want invalid, past the end of the trail", past, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
