package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A wait whose context was cancelled before it began takes nothing: like
// Acquire on a cancelled context (timeout, nothing sent), and as Hold
// without Wait does. AcquireWait's first attempt is sent on a context
// detached from ctx, whose cancellation reaches it only through
// context.AfterFunc's goroutine, so the acquire usually runs first and
// takes the key for a caller that already gave up.
func TestAcquireWaitOnACancelledContextTakesNothing(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		k := protocol.Key{Namespace: "waitcancel", Name: "cancelled-" + string(rune('a'+i))}
		res, err := protocol.AcquireWait(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute}, nil)
		if res.Status == protocol.StatusAcquired {
			t.Fatalf("attempt %d: AcquireWait on a cancelled context answered %q (%v): it took %s with token %d for a caller that had cancelled",
				i, res.Status, err, k, res.Lease.Token)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d: error %v, want one matching context.Canceled", i, err)
		}
		if got, _ := rt.Get(context.Background(), protocol.GetRequest{Key: k}); got.Status != protocol.StatusNotFound {
			t.Fatalf("attempt %d: after a cancelled wait the key is %q, want not_found", i, got.Status)
		}
	}
}

// Hold with Wait on a cancelled context must not leave a lease behind:
// Hold without Wait answers timeout and writes nothing.
func TestHoldWaitOnACancelledContextTakesNothing(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := protocol.Key{Namespace: "waitcancel", Name: "hold-cancelled"}
	if _, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute}, nil); err == nil {
		t.Fatal("Hold without Wait on a cancelled context succeeded")
	}
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute},
		&protocol.HoldConfig{Wait: &protocol.WaitConfig{}})
	if err == nil {
		<-h.Done()
		got, _ := rt.Get(context.Background(), protocol.GetRequest{Key: k})
		h.Release(context.Background())
		t.Fatalf("Hold with Wait on a cancelled context returned a Held (token %d) and the key is %q: a lease written for a caller that had cancelled",
			h.Token(), got.Status)
	}
}

// A waiter asleep when its context ends answers conflict matching ctx's
// error ("or conflict matching context.Canceled when the waiter was
// asleep"; "ctx's deadline bounds the waiting, not an attempt in flight").
// When the store's signal is pending at the same moment, acquireWait's
// select picks at random between it and ctx.Done, and on the signal it
// sends a new attempt after ctx ended, which takes the key.
func TestWaiterWhoseContextEndedSendsNoNewAttempt(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cancel", "deadline"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			rt := protocol.New(memstore.New(nil), nil)
			defer rt.Close(context.Background())
			for i := range 20 {
				k := protocol.Key{Namespace: "waitcancel", Name: mode + "-" + string(rune('a'+i))}
				first, err := rt.Acquire(context.Background(), protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				var ctx context.Context
				var cancel context.CancelFunc
				if mode == "cancel" {
					ctx, cancel = context.WithCancel(context.Background())
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
				}
				cfg := &protocol.WaitConfig{Waiting: func(protocol.Lease) {
					// On the waiting goroutine, just before it sleeps: ctx
					// ends, then the holder lets go (a signal is pending).
					if mode == "cancel" {
						cancel()
					} else {
						<-ctx.Done()
					}
					if _, err := rt.Release(context.Background(), protocol.ReleaseRequest{Key: k, Owner: "holder", Token: first.Lease.Token}); err != nil {
						t.Error(err)
					}
				}}
				res, err := protocol.AcquireWait(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, cfg)
				cancel()
				if res.Status == protocol.StatusAcquired {
					t.Fatalf("round %d: a waiter whose context had ended (%v) before it slept sent another attempt and answered %q (%v), want conflict matching %v",
						i, ctx.Err(), res.Status, err, ctx.Err())
				}
			}
		})
	}
}
