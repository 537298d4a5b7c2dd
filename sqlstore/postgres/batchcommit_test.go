package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// failBatchCommitSQL makes every transaction that writes more than one
// audit record (a coalesced batch; an operation alone writes one) fail at
// its commit with SQLSTATE code: a row trigger counts the records in a
// transaction-local setting (kept by a released subtransaction, undone by
// a rolled-back one), and a deferred constraint trigger raises at commit,
// after counting the failure in a sequence (which no rollback undoes).
const failBatchCommitSQL = `
CREATE SEQUENCE test_batch_failures;
CREATE FUNCTION test_count_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('leasestore_test.audits',
		(coalesce(nullif(current_setting('leasestore_test.audits', true), ''), '0')::int + 1)::text, true);
	RETURN NEW;
END $$;
CREATE FUNCTION test_fail_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF coalesce(nullif(current_setting('leasestore_test.audits', true), ''), '0')::int > 1 THEN
		PERFORM nextval('test_batch_failures');
		RAISE EXCEPTION 'test: a transaction of %% audit records', current_setting('leasestore_test.audits')
			USING ERRCODE = '%s';
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER test_count_audit BEFORE INSERT ON leasestore_audit FOR EACH ROW EXECUTE FUNCTION test_count_audit();
CREATE CONSTRAINT TRIGGER test_fail_batch AFTER INSERT ON leasestore_audit DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION test_fail_batch();`

// A coalesced batch whose commit fails (a deferred constraint, a
// serialization failure raised at commit) lets no answer judged inside it
// leave the backend: 16 acquires queued into one batch (8 owners on one
// key, one request retried 8 times with one request id on another) each
// answer what the committed trail says (acquired or replayed with a token
// the trail gives that owner, conflict naming a holder the trail has), or
// unavailable/timeout.
func TestBatchCommitFailureAnswersNothingUncommitted(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"23514", "40001"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			admin := rawConn(t, dsn)
			b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxInFlight: 1}))
			// After Open, which refuses triggers on the trail that are not the store's own.
			mustExec(t, admin, fmt.Sprintf(failBatchCommitSQL, code))
			ctx := ctxT(t)
			blocker := "blocker-" + code // advisory locks are shared by every schema
			res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(blocker), Owner: "o", TTL: time.Minute, RequestID: "b1"})
			wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			res, err = b.Release(ctx, protocol.ReleaseRequest{Key: key(blocker), Owner: "o", Token: res.Lease.Token, RequestID: "b2"})
			wantStatus(t, "release", res, err, protocol.StatusReleased)

			// The one slot waits on a row lock while the 16 queue.
			locker := rawConn(t, dsn)
			tx, err := locker.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, tx, `SELECT 1 FROM leasestore_leases WHERE namespace = 'ns' AND name = $1 FOR UPDATE`, blocker)
			var wg sync.WaitGroup
			wg.Go(func() {
				_, _ = b.Acquire(ctx, protocol.AcquireRequest{Key: key(blocker), Owner: "o", TTL: time.Minute, RequestID: "b3"})
			})
			for count(t, admin, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
				locker.PgConn().PID()) == 0 {
				time.Sleep(time.Millisecond)
			}
			type answer struct {
				req protocol.AcquireRequest
				res protocol.Result
				err error
			}
			answers := make(chan answer, 16)
			for i := range 16 {
				req := protocol.AcquireRequest{Key: key("k-" + code), Owner: fmt.Sprintf("o%d", i), TTL: time.Minute,
					RequestID: fmt.Sprintf("r%d", i)}
				if i >= 8 {
					req = protocol.AcquireRequest{Key: key("r-" + code), Owner: "retrier", TTL: time.Minute, RequestID: "same"}
				}
				wg.Go(func() {
					res, err := b.Acquire(ctx, req)
					answers <- answer{req, res, err}
				})
			}
			for postgres.QueueLen(b) != 16 {
				if ctx.Err() != nil {
					t.Fatal("the 16 acquires did not queue")
				}
				time.Sleep(time.Millisecond)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(answers)
			if count(t, admin, `SELECT count(*) FROM test_batch_failures WHERE is_called`) == 0 {
				t.Fatal("no batch failed at its commit: the case was not exercised")
			}

			// What the trail says happened.
			issued := map[string]audit.Record{} // owner/token -> its acquire record
			page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: audit.MaxLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				if r.Op == protocol.OpAcquire {
					issued[fmt.Sprintf("%s/%d", r.Owner, r.Token)] = r
				}
			}
			for a := range answers {
				switch {
				case a.err != nil:
					if st := protocol.StatusOf(a.err); st != protocol.StatusUnavailable && st != protocol.StatusTimeout {
						t.Errorf("%s %s: %v, want unavailable or timeout", a.req.Owner, a.req.RequestID, a.err)
					}
				case a.res.Status == protocol.StatusAcquired || a.res.Status == protocol.StatusConflict:
					l := a.res.Lease
					r, ok := issued[fmt.Sprintf("%s/%d", l.Owner, l.Token)]
					if !ok || r.Key != l.Key.Name {
						t.Errorf("%s %s: %s (replayed %v) with %s's token %d on %s, which the trail never issued",
							a.req.Owner, a.req.RequestID, a.res.Status, a.res.Replayed, l.Owner, l.Token, l.Key)
					}
					if a.res.Status == protocol.StatusAcquired && l.Owner != a.req.Owner {
						t.Errorf("%s: acquired with %s's lease", a.req.Owner, l.Owner)
					}
				default:
					t.Errorf("%s %s: %+v", a.req.Owner, a.req.RequestID, a.res)
				}
			}
		})
	}
}
