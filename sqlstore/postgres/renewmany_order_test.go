package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// RenewMany renews in the order given: two renewals of one key behave as
// if sent one after the other (protocol.BulkRenewer), so the key ends as
// the later one left it and its answer tells the lease the store holds.
// Here the first renewal's request id is in an insert of another session
// still in progress (a copy of the request sent again, say): the batch
// cannot tell its outcome and runs it again alone, where it waits until
// that session ends (it rolls back); the second renewal must not commit
// before it.
func TestRenewManyKeepsTheOrderOfOneKeysRenewals(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	k := keysIn(ns)("job")
	b := openBackend(t, dsn, nil)
	ctx := ctxT(t)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute, RequestID: "acq"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	tok := res.Lease.Token

	// Another session's insert of the first renewal's request id, in progress.
	other := rawConn(t, dsn)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, `INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
		status, version, params_hash) VALUES (9000000000000, now(), 'renew', $1, 'elsewhere', 'w', 1, 'first', 'w', '', 'renewed', 1, 'x')`, ns)

	reqs := []protocol.RenewRequest{
		{Key: k, Owner: "w", Token: tok, TTL: 10 * time.Second, RequestID: "first"},
		{Key: k, Owner: "w", Token: tok, TTL: time.Hour, RequestID: "second"},
	}
	type answer struct {
		res []protocol.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := b.RenewMany(ctx, reqs)
		done <- answer{res, err}
	}()
	// Once the first renewal waits for the other session alone (not the
	// batch's millisecond), that session rolls back.
	admin := rawConn(t, dsn)
	for count(t, admin, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND $1 = ANY(pg_blocking_pids(l.pid)) AND a.query NOT LIKE '%leasestore_change_batch%'`,
		other.PgConn().PID()) == 0 {
		select {
		case a := <-done:
			t.Fatalf("renew many answered before the other session ended: %+v %v", a.res, a.err)
		case <-time.After(time.Millisecond):
		}
		if ctx.Err() != nil {
			t.Fatal("the first renewal never waited alone for the other session")
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil {
		t.Fatalf("renew many: %v", a.err)
	}
	for i, r := range a.res {
		if r.Status != protocol.StatusRenewed {
			t.Fatalf("renewal %d: %s (%s), want renewed", i, r.Status, r.Message)
		}
	}
	first, second := a.res[0].Lease, a.res[1].Lease
	got, err := b.Get(ctx, protocol.GetRequest{Key: k})
	wantStatus(t, "get", got, err, protocol.StatusFound)
	if second.RenewedAt.Before(first.RenewedAt) || !got.Lease.ExpiresAt.Equal(second.ExpiresAt) {
		t.Fatalf("renewals of one key out of order: the first renewed at %v (expires %v), the second at %v (expires %v); "+
			"the store holds expiry %v, want the second's", first.RenewedAt, first.ExpiresAt, second.RenewedAt, second.ExpiresAt,
			got.Lease.ExpiresAt)
	}
}
