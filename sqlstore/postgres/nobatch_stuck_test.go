package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// Contract v3: a member waiting on its key delays no member on another
// key, whatever a DBA does (here: no TEMP privilege on the database, so
// the server refuses the batch function and the backend stops batching).
// Two operations queue behind the one slot, the first on a key another
// session keeps locked, the second on a free key; when the slot frees they
// go together, and the free key's acquire must not wait for the locked
// key's (which waits until its own deadline). The queue is held
// (WithHeldQueue) so that the two go together, as they do when both queue
// within the wait after which a round trip over the limit takes the queue.
func TestStuckKeyDelaysNoOtherKeyWithoutTheBatchFunction(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	key := keysIn(ns)
	b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxConns: 4, MaxInFlight: 1}))
	postgres.RefuseBatchFunction(b)
	acq := func(name string) queuedOp {
		return queuedOp{name: name, run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}}
	}
	for name, a := range batchOf(t, dsn, b, acq("r1"), acq("r2")) {
		wantStatus(t, name, a.res, a.err, protocol.StatusAcquired)
	}
	if !postgres.NoBatch(b) {
		t.Fatal("the backend still batches: the case is not exercised")
	}

	locker := rawConn(t, dsn)
	for _, name := range []string{"slot", "stuck"} {
		mustExec(t, locker, `SELECT pg_advisory_lock(1818583411, hashtext($1))`, ns+"/"+name)
	}
	defer mustExec(t, locker, `SELECT pg_advisory_unlock_all()`)
	slot := make(chan error, 1)
	go func() {
		_, err := acq("slot").run(ctxT(t))
		slot <- err
	}()
	waitFor(t, func() bool { return waitsOn(ctxT(t), locker) > 0 })
	stuck := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := acq("stuck").run(ctx)
		stuck <- err
	}()
	waitFor(t, func() bool { return postgres.QueueLen(b) == 1 })
	type answer struct {
		res  protocol.Result
		err  error
		took time.Duration
	}
	free := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		res, err := acq("free").run(ctx)
		free <- answer{res, err, time.Since(start)}
	}()
	waitFor(t, func() bool { return postgres.QueueLen(b) == 2 })
	// The slot frees: the two queued go together.
	mustExec(t, locker, `SELECT pg_advisory_unlock(1818583411, hashtext($1))`, ns+"/slot")
	if err := <-slot; err != nil {
		t.Fatalf("the slot's acquire: %v", err)
	}
	a := <-free
	if a.err != nil || a.res.Status != protocol.StatusAcquired || a.took > 3*time.Second {
		t.Fatalf("acquire of a free key queued behind one whose key is locked: %s %v after %v, want acquired at once",
			a.res.Status, a.err, a.took.Round(time.Millisecond))
	}
}
