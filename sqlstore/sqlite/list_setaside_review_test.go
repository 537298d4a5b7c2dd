package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// TestListShowsALiveLeaseAnotherProcessSetAside: the sweeper of a
// process whose clock runs ahead of another's (or a sweep that ran just
// before the wall clock was stepped back) sets aside a row its clock finds
// expired (qSetAside: swept_token = token, out of the live indexes). To the
// process with the slower clock the lease is live: get answers found,
// acquire conflict, and a renew by its holder puts the row back
// (TestRenewOfSetAsideLiveLeaseListsIt). But until its holder renews, list
// and list --owner, which read only the live indexes (swept_token IS NOT
// token), leave it out: at one instant, on one Backend, get and list
// disagree about a live lease, and `leasectl list` hides a lease that
// `leasectl get` shows and that blocks every acquire.
func TestListShowsALiveLeaseAnotherProcessSetAside(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	slow := newClock()
	fast := newClock()
	fast.Advance(2 * time.Minute) // the sweeping process's clock runs ahead
	b := open(t, path, slow)
	sweeper := open(t, path, fast)

	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "a1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	swept, err := sweeper.Sweep(ctxT(t), 100, time.Hour) // a grace of an hour: nothing removed, only set aside
	if err != nil {
		t.Fatal(err)
	}
	if swept.Removed != 0 || swept.SetAside != 1 {
		t.Fatalf("sweep by the process whose clock runs ahead: %+v; want the row set aside, none removed", swept)
	}

	got, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g"})
	wantStatus(t, "get on the process whose clock finds the lease live", got, err, protocol.StatusFound)
	taken, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "other", TTL: time.Minute, RequestID: "a2"})
	wantStatus(t, "acquire by another owner", taken, err, protocol.StatusConflict)

	for _, req := range []protocol.ListRequest{{Namespace: "ns", RequestID: "l1"}, {Namespace: "ns", Owner: "w", RequestID: "l2"}} {
		page, err := b.List(ctxT(t), req)
		if err != nil {
			t.Fatalf("list %+v: %v", req, err)
		}
		if len(page.Leases) != 1 {
			t.Errorf("list (prefix %q, owner %q) on the Backend whose get answers found for %s (expires %s, its clock %s): "+
				"%d leases; want the live lease (another process's sweeper set its row aside)",
				req.Prefix, req.Owner, got.Lease.Key, got.Lease.ExpiresAt.Format(time.RFC3339), slow.Now().Format(time.RFC3339),
				len(page.Leases))
		}
	}
}
