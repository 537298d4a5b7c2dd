package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// TestWaitHearsAHolderShortenItsLease: a waiter (`leasectl acquire
// --wait`, `run --wait`, AcquireWait with the default WaitConfig) sleeps
// until the expiry of the lease its last attempt met, bounded by
// DefaultRecheck (30s), or until a signal. The holder, in another process
// (here another Backend on the file), renews with a shorter TTL: its
// lease now ends in a fraction of a second, yet the notifier signals
// only releases and revokes (qWakeKeys: op IN ('release', 'revoke')), so
// the waiter sleeps on toward the old expiry and its wait runs out with
// conflict on a key that has been free for seconds. DESIGN.md: acquire
// --wait blocks "until acquired (woken by the release, revoke or expiry
// of the holder, not by tight polling)". Found with two leasectl
// processes: `acquire k --ttl 1h`, `acquire k --wait --wait-timeout 20s`,
// `renew k --ttl 1s`: the waiter exited 3 after 20s.
func TestWaitHearsAHolderShortenItsLease(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	holder := open(t, path, nil) // the holder's process
	waiter := protocol.New(open(t, path, nil), nil)
	defer waiter.Close(context.Background())

	held, err := holder.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "holder", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "holder's acquire", held, err, protocol.StatusAcquired)

	waiting := make(chan protocol.Lease, 16)
	type answer struct {
		res protocol.Result
		err error
	}
	done := make(chan answer, 1)
	wctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	go func() {
		res, err := waiter.AcquireWait(wctx, protocol.AcquireRequest{Key: key("k"), Owner: "waiter", TTL: time.Minute},
			&protocol.WaitConfig{Waiting: func(l protocol.Lease) { waiting <- l }})
		done <- answer{res, err}
	}()
	select {
	case <-waiting:
	case a := <-done:
		t.Fatalf("the waiter returned before the holder renewed: %q, %v", a.res.Status, a.err)
	}

	renewed, err := holder.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "holder", Token: held.Lease.Token,
		TTL: 300 * time.Millisecond, RequestID: "r"})
	wantStatus(t, "holder's shortening renew", renewed, err, protocol.StatusRenewed)
	shortened := time.Now()

	a := <-done
	if a.err != nil || a.res.Status != protocol.StatusAcquired {
		t.Fatalf("the holder renewed its lease to end 300ms later; %s after that the waiter answered %q (%s), %v; "+
			"want it woken by the new expiry and acquired (it slept toward the old expiry, %s)",
			time.Since(shortened).Round(time.Millisecond), a.res.Status, a.res.Message, a.err,
			held.Lease.ExpiresAt.Format(time.RFC3339))
	}
	if took := time.Since(shortened); took > 3*time.Second {
		t.Fatalf("the waiter acquired %s after the holder's lease was shortened to 300ms: it slept past the new expiry", took)
	}
}
