package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// Contract v3: a member waiting on its key delays no member on another
// key. RenewMany of three keys: k0's row stays locked by another session
// for the whole call, k1's only while the batch runs (a sweeper's moment,
// say), k2's is free. The batch renews k2 and leaves k0 and k1 to run again
// alone; k1's key is free from then on, so k1 is renewed, whatever k0's
// wait, which ends at the call's deadline.
func TestRenewManyStuckKeyDelaysNoOtherKeysRenewal(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	k := keysIn(ns)
	b := openBackend(t, dsn, nil)
	acquireKeys(t, b, k, 3, time.Hour)
	reqs := make([]protocol.RenewRequest, 3)
	for i := range reqs {
		got, err := b.Get(ctxT(t), protocol.GetRequest{Key: k(fmt.Sprintf("k%d", i))})
		wantStatus(t, "get", got, err, protocol.StatusFound)
		reqs[i] = protocol.RenewRequest{Key: got.Lease.Key, Owner: "w", Token: got.Lease.Token, TTL: time.Hour,
			RequestID: fmt.Sprintf("r%d", i)}
	}
	stuckConn := rawConn(t, dsn)
	stuck, err := stuckConn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stuck.Rollback(context.Background()) }()
	mustExec(t, stuck, `SELECT 1 FROM leasestore_leases WHERE namespace = $1 AND name = 'k0' FOR UPDATE`, ns)
	k1Conn := rawConn(t, dsn)
	k1Lock, err := k1Conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	freeK1 := func() { _ = k1Lock.Rollback(context.Background()) }
	defer freeK1()
	mustExec(t, k1Lock, `SELECT 1 FROM leasestore_leases WHERE namespace = $1 AND name = 'k1' FOR UPDATE`, ns)

	type answer struct {
		res []protocol.Result
		err error
	}
	done := make(chan answer, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go func() {
		res, err := b.RenewMany(ctx, reqs)
		done <- answer{res, err}
	}()
	// Once the batch committed (k2's record) and k0 waits alone, k1's key is free.
	admin := rawConn(t, dsn)
	for count(t, admin, `SELECT count(*) FROM leasestore_audit WHERE namespace = $1 AND request_id = 'r2'`, ns) == 0 ||
		waitsOn(ctxT(t), stuckConn) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the batch never committed while k0 waited alone: the case was not exercised")
		}
		time.Sleep(time.Millisecond)
	}
	freeK1()
	a := <-done
	if a.err != nil {
		t.Fatalf("renew many: %v", a.err)
	}
	if st := a.res[2].Status; st != protocol.StatusRenewed {
		t.Fatalf("k2: %s (%s), want renewed", st, a.res[2].Message)
	}
	if st := a.res[1].Status; st != protocol.StatusRenewed {
		t.Fatalf("k1, whose key was free from the batch's commit on: %s (%s), want renewed (k0: %s)",
			st, a.res[1].Message, a.res[0].Status)
	}
}
