package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A renew of a lease the sweeper of a process with a faster clock set
// aside while it was still live puts it back in the live indexes: lists
// show it, as they did while it was set aside (from the set-aside index,
// schema 12).
func TestRenewOfSetAsideLiveLeaseListsIt(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	other, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctxT(t), `UPDATE leasestore_leases SET swept_token = token`); err != nil {
		t.Fatal(err)
	}
	for _, req := range []protocol.ListRequest{{Namespace: "ns"}, {Namespace: "ns", Owner: "w"}} {
		if page, err := b.List(ctxT(t), req); err != nil || len(page.Leases) != 1 {
			t.Fatalf("list %+v of a live lease set aside: %d leases, %v; want it (TestListShowsALiveLeaseAnotherProcessSetAside)", req, len(page.Leases), err)
		}
	}
	renew, err := b.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: time.Hour, RequestID: "r1"})
	wantStatus(t, "renew", renew, err, protocol.StatusRenewed)
	for _, req := range []protocol.ListRequest{{Namespace: "ns"}, {Namespace: "ns", Owner: "w"}} {
		if page, err := b.List(ctxT(t), req); err != nil || len(page.Leases) != 1 {
			t.Errorf("list %+v after the renew: %d leases, %v; want the renewed one", req, len(page.Leases), err)
		}
	}
	var swept any
	if err := other.QueryRowContext(ctxT(t), `SELECT swept_token FROM leasestore_leases`).Scan(&swept); err != nil || swept != nil {
		t.Errorf("swept_token after the renew: %v, %v; want NULL", swept, err)
	}
}
