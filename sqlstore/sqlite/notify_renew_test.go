package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// TestRenewSignalsOnlyWhenItShortens: the poller wakes a key's waiters for
// a renew from another process that ends the lease earlier than before,
// and for none that extends it (the usual renew: every holder's, every few
// seconds), which would have each waiter try to acquire again for nothing.
func TestRenewSignalsOnlyWhenItShortens(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	holder := open(t, path, nil)
	waiter := open(t, path, nil)

	held, err := holder.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "holder", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", held, err, protocol.StatusAcquired)
	ch, cancel, err := waiter.Subscribe(ctxT(t), key("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()

	renew := func(rid string, ttl time.Duration) {
		t.Helper()
		res, err := holder.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "holder", Token: held.Lease.Token,
			TTL: ttl, RequestID: rid})
		wantStatus(t, "renew "+rid, res, err, protocol.StatusRenewed)
	}
	renew("longer", 2*time.Hour)
	select {
	case <-ch:
		t.Fatal("a renew that extended the lease (1h to 2h) woke the key's waiter")
	case <-time.After(300 * time.Millisecond): // 60 poll intervals
	}
	renew("shorter", time.Minute)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("a renew that shortened the lease (2h to 1m) did not wake the key's waiter within 5s")
	}
}
