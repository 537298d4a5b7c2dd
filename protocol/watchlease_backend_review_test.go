package protocol_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// WatchLease hears a revoke at once over any Store that signals, a backend
// used directly included (docs/holding.md: "the backend a Hold was given").
// A backend answers the confirming get not_found in its Result with a nil
// error (protocol.Backend's rule), carrying the ended lease while a
// lock-delay keeps the key: both are a loss, not "the read told nothing"
// nor "still held".
func TestWatchLeaseOverABackendHearsARevoke(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, time.Minute} {
		t.Run("lock-delay "+delay.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The store's clock counts its reads: WatchLease reads the key
			// once its subscription is live, so a read after the acquire
			// says the watch is subscribed.
			var reads atomic.Int64
			st := memstore.NewStore(&memstore.Config{Now: func() time.Time { reads.Add(1); return time.Now() }})
			b, admin := st.Handle(), st.Handle()
			defer b.Close(context.Background())
			defer admin.Close(context.Background())
			k := holdKey(t)
			res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Hour, LockDelay: delay, RequestID: "acq-1"})
			if err != nil || res.Lease == nil {
				t.Fatalf("acquire: %s, %v", res.Status, err)
			}
			lost := make(chan error, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				protocol.WatchLease(ctx, b, *res.Lease, time.Second, func(why error) { lost <- why })
			}()
			// Revoke only once the watch is subscribed (it read the key).
			deadline := time.Now().Add(5 * time.Second)
			for reads.Load() < 2 {
				if time.Now().After(deadline) {
					t.Fatal("the watch never subscribed")
				}
				time.Sleep(time.Millisecond)
			}
			rv, err := admin.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck", RequestID: "rev-1"})
			if err != nil || rv.Status != protocol.StatusRevoked {
				t.Fatalf("revoke: %s, %v", rv.Status, err)
			}
			select {
			case why := <-lost:
				t.Logf("lost: %v", why)
			case <-time.After(5 * time.Second):
				got, _ := b.Get(ctx, protocol.GetRequest{Key: k})
				t.Errorf("WatchLease over a bare backend did not report the revoke within 5s: the get after the signal answers %s "+
					"(lease %v) with a nil error, which it takes for no news or for the lease still held", got.Status, got.Lease != nil)
			}
			cancel()
			<-done
		})
	}
}
