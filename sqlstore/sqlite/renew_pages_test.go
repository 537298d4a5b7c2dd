package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// A renew changes the lease's times, which no index holds: it must not
// rewrite the entries of the live indexes (every page written is a frame of
// the log, written and synced with the commit).
func TestRenewWritesNoLiveIndexPage(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	w := pinWAL(t, path)
	for i := range 3 {
		renew, err := b.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: time.Hour,
			RequestID: "r" + string(rune('0'+i))})
		wantStatus(t, "renew", renew, err, protocol.StatusRenewed)
		w.count("renew")
	}
	trees := w.byTree()["renew"]
	for _, index := range []string{"leasestore_leases_live", "leasestore_leases_owner_live"} {
		if n := trees[index]; n != 0 {
			t.Errorf("a renew wrote %.2f pages of %s; want none (pages per renew: %v)", n, index, trees)
		}
	}
	if trees["leasestore_leases"] == 0 || trees["leasestore_audit"] == 0 {
		t.Fatalf("pages per renew %v: the lease's row and its record should be among them", trees)
	}
}
