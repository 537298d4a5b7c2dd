package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestCloseWaitsForAWriteInFlight: a write that began before Close either
// ends before Close returns or is refused; none is committed after Close
// returned (Close's doc: operations after it fail; "a Backend refuses
// every write once Close began"). Close waits only for the writes of a
// batch (waitWrites): a write run alone, waiting for the file's write lock
// (held here by another connection), was left running, and once the lock
// came free it prepared the closed statements again and committed, after
// Close had returned, answering acquired.
func TestCloseWaitsForAWriteInFlight(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	db := rawDB(t, path)
	b, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := rawDB(t, path)
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res protocol.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "r1"})
		done <- answer{res, err}
	}()
	time.Sleep(100 * time.Millisecond) // the acquire waits for the write lock (busy_timeout)
	select {
	case a := <-done:
		t.Fatalf("the acquire did not wait for the write lock: %v %v", a.res.Status, a.err)
	default:
	}
	// The other connection lets go of the lock a while after Close began.
	release := time.AfterFunc(300*time.Millisecond, func() { _, _ = lock.ExecContext(context.Background(), "ROLLBACK") })
	defer release.Stop()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_audit`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	atClose := count()
	a := <-done
	if after := count(); after != atClose {
		t.Errorf("the acquire begun before Close committed after Close returned (%d audit records when Close returned, %d after); it answered %q, %v",
			atClose, after, a.res.Status, a.err)
	}
}
