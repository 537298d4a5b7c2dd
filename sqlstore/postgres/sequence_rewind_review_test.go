package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestSequenceSetBackUnderARunningBackendKeepsSweptKeysFenced: a
// switchover to a logical replica (which carries no sequence state) under
// a running fleet sets the fencing sequence back while the backends keep
// serving: nothing calls Health between the switchover and the next
// acquire. DESIGN.md: every acquire issues a token greater than every
// token ever issued for the key, and a switchover is made harmless or
// refused. A key whose row the sweep removed has no row to take its floor
// from, so its next acquire drew the rewound sequence's value: a token
// the key already had (a fenced resource that saw the old holder's token
// accepts the new holder's smaller one as stale, or worse, accepts the
// old holder's writes). Both paths that draw a token are checked: an
// acquire alone and one in a coalesced batch.
func TestSequenceSetBackUnderARunningBackendKeepsSweptKeysFenced(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			key := keysIn(pgtest.Namespace())
			b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxInFlight: 1}))
			raw := rawPool(t, dsn)
			// Tokens well above the few the set-back sequence gives the
			// batch's other members first.
			mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 1000)")
			gone, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w", TTL: time.Hour, RequestID: "a-gone"})
			wantStatus(t, "acquire gone", gone, err, protocol.StatusAcquired)
			res, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("gone"), Owner: "w", Token: gone.Lease.Token,
				RequestID: "r-gone"})
			wantStatus(t, "release gone", res, err, protocol.StatusReleased)
			held, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Hour, RequestID: "a-held"})
			wantStatus(t, "acquire held", held, err, protocol.StatusAcquired)
			if _, err := b.Sweep(ctxT(t), 100, 0); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if n := count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE name = 'gone'"); n != 0 {
				t.Fatalf("precondition: the sweep left gone's row (%d rows)", n)
			}
			// The switchover, under the running backend: no Open, no Health.
			mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 1, false)")
			req := protocol.AcquireRequest{Key: key("gone"), Owner: "w2", TTL: time.Hour, RequestID: "a-gone-again"}
			var again protocol.Result
			if !batched {
				again, err = b.Acquire(ctxT(t), req)
			} else {
				again, err = acquireInABatch(t, b, dsn, key, req)
			}
			if err == nil && again.Status == protocol.StatusAcquired && again.Lease.Token <= gone.Lease.Token {
				t.Fatalf("the swept key got token %d after the sequence was set back; it had token %d before "+
					"(want a greater token, or a refusal naming the sequence)", again.Lease.Token, gone.Lease.Token)
			}
			if err != nil || again.Status != protocol.StatusAcquired {
				t.Fatalf("acquire after the set-back: %v %+v", err, again)
			}
		})
	}
}

// acquireInABatch runs req in a coalesced batch with two other acquires:
// the backend's one slot (MaxInFlight 1, held queue) waits on a row lock
// of a blocker key while the three queue, and they go out together when
// the lock goes. It returns req's answer, after checking that the batch
// formed.
func acquireInABatch(t *testing.T, b *postgres.Backend, dsn string, key func(string) protocol.Key,
	req protocol.AcquireRequest) (protocol.Result, error) {
	t.Helper()
	ctx := ctxT(t)
	blocker := key("blocker")
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: blocker, Owner: "o", TTL: time.Minute, RequestID: "b1"})
	wantStatus(t, "acquire blocker", res, err, protocol.StatusAcquired)
	res, err = b.Release(ctx, protocol.ReleaseRequest{Key: blocker, Owner: "o", Token: res.Lease.Token, RequestID: "b2"})
	wantStatus(t, "release blocker", res, err, protocol.StatusReleased)
	admin := rawConn(t, dsn)
	locker := rawConn(t, dsn)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, `SELECT 1 FROM leasestore_leases WHERE namespace = $1 AND name = $2 FOR UPDATE`,
		blocker.Namespace, blocker.Name)
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = b.Acquire(ctx, protocol.AcquireRequest{Key: blocker, Owner: "o", TTL: time.Minute, RequestID: "b3"})
	})
	for count(t, admin, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
		locker.PgConn().PID()) == 0 {
		time.Sleep(time.Millisecond)
	}
	var answer protocol.Result
	var answerErr error
	wg.Go(func() { answer, answerErr = b.Acquire(ctx, req) })
	for _, name := range []string{"other1", "other2"} {
		wg.Go(func() {
			_, _ = b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: "a-" + name})
		})
	}
	for postgres.QueueLen(b) != 3 {
		if ctx.Err() != nil {
			t.Fatal("the 3 acquires did not queue")
		}
		time.Sleep(time.Millisecond)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return answer, answerErr
}
