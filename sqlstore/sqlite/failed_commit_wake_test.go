package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestFailedReleaseHidesNoOtherProcessRelease: a release through this
// Backend whose transaction does not commit (here its batch's deadline
// passes while a later write of the batch runs, and database/sql rolls the
// transaction back; in the field a commit that fails) wrote an audit
// record whose id the Backend marked as its own, to be signalled in
// process rather than by the poller. Once the transaction is rolled back,
// another process's next record takes that same id: here the release of
// a key a waiter of this Backend waits for. The poller must wake that
// waiter; it skipped the record as this Backend's own, until the failed
// release got its answer and let the mark go, too late.
func TestFailedReleaseHidesNoOtherProcessRelease(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	other := open(t, path, nil) // another process on the file
	mine, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("mine"), Owner: "w", TTL: time.Minute, RequestID: "a1"})
	wantStatus(t, "acquire mine", mine, err, protocol.StatusAcquired)
	theirs, err := other.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("theirs"), Owner: "o", TTL: time.Minute, RequestID: "a2"})
	wantStatus(t, "acquire theirs", theirs, err, protocol.StatusAcquired)
	ch, cancel, err := b.Subscribe(ctxT(t), key("theirs"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	db := otherHandle(t, path)
	var top int64
	if err := db.QueryRowContext(ctxT(t), `SELECT max(id) FROM leasestore_audit`).Scan(&top); err != nil {
		t.Fatal(err)
	}

	// One batch: the release of mine, then a write that runs past the
	// batch's deadline.
	const deadline = 300 * time.Millisecond
	start := time.Now()
	hold := sqlite.HoldWriter(b)
	released := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(deadline))
		defer cancel()
		_, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("mine"), Owner: "w", Token: mine.Lease.Token, RequestID: "r1"})
		released <- err
	}()
	waitQueued(ctxT(t), t, b, 1)
	slow := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(deadline))
		defer cancel()
		slow <- sqlite.SlowWrite(ctx, b, "slow", start.Add(deadline+2*time.Second))
	}()
	waitQueued(ctxT(t), t, b, 2)
	hold()
	defer func() { <-slow; <-released }()

	time.Sleep(time.Until(start.Add(deadline + 100*time.Millisecond))) // the batch's transaction was rolled back
	res, err := other.Release(ctxT(t), protocol.ReleaseRequest{Key: key("theirs"), Owner: "o", Token: theirs.Lease.Token, RequestID: "r2"})
	wantStatus(t, "release theirs", res, err, protocol.StatusReleased)
	var id int64
	if err := db.QueryRowContext(ctxT(t), `SELECT id FROM leasestore_audit WHERE request_id = 'r2'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if id != top+1 {
		t.Fatalf("the other process's release has audit id %d, not %d, the id of the release that was rolled back: "+
			"the test would prove nothing", id, top+1)
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatalf("the waiter of theirs was not woken within 1s of its release by another process (audit id %d): "+
			"the poller took the record for this Backend's own release, which was rolled back", id)
	}
	if r, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("mine")}); err != nil || r.Status != protocol.StatusFound {
		t.Fatalf("mine: %q, %v; want still held (its release was rolled back)", r.Status, err)
	}
}
