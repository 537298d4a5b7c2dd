package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// plainStore hides the runtime's Notifier, as a Store that cannot signal.
type plainStore struct{ protocol.Store }

// plainBackend hides memstore's Notifier from the runtime.
type plainBackend struct{ protocol.Backend }

func waitKey() protocol.Key { return protocol.Key{Namespace: "ns", Name: "k"} }

// startAcquireWait runs AcquireWait in a goroutine and reports each holder it
// sleeps on.
func startAcquireWait(ctx context.Context, s protocol.Store, owner string, cfg protocol.WaitConfig) (<-chan protocol.Lease, <-chan error, *protocol.Result) {
	waiting := make(chan protocol.Lease, 100)
	done := make(chan error, 1)
	var res protocol.Result
	cfg.Waiting = func(l protocol.Lease) {
		select {
		case waiting <- l:
		default:
		}
	}
	go func() {
		var err error
		res, err = protocol.AcquireWait(ctx, s, protocol.AcquireRequest{Key: waitKey(), Owner: owner, TTL: time.Minute}, &cfg)
		done <- err
	}()
	return waiting, done, &res
}

func TestAcquireWaitFallsBackToRecheckWithoutNotifier(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		store func(rt *protocol.Runtime) protocol.Store
		rt    func() *protocol.Runtime
	}{
		{"store_without_notifier", func(rt *protocol.Runtime) protocol.Store { return plainStore{rt} },
			func() *protocol.Runtime { return protocol.New(memstore.New(nil), nil) }},
		{"backend_without_notifier", func(rt *protocol.Runtime) protocol.Store { return rt },
			func() *protocol.Runtime { return protocol.New(plainBackend{memstore.New(nil)}, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt := tc.rt()
			defer rt.Close(ctx)
			if _, _, err := rt.Subscribe(ctx, waitKey()); tc.name == "backend_without_notifier" && !errors.Is(err, protocol.ErrNoNotifier) {
				t.Fatalf("Subscribe on a backend that cannot signal: %v, want ErrNoNotifier", err)
			}
			held, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: waitKey(), Owner: "holder", TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			waiting, done, res := startAcquireWait(ctx, tc.store(rt), "waiter", protocol.WaitConfig{Recheck: 5 * time.Millisecond})
			<-waiting
			<-waiting // it re-checked without a signal: the holder still holds
			if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: waitKey(), Owner: "holder", Token: held.Lease.Token}); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("wait: %v", err)
			}
			if res.Status != protocol.StatusAcquired || res.Lease.Owner != "waiter" {
				t.Fatalf("wait answered %+v", res)
			}
		})
	}
}

// A holder whose lease expired by the local clock but not by the store's
// (the store's clock is behind) must not make the waiter spin: its sleeps
// double from a millisecond.
func TestAcquireWaitBacksOffWhenTheStoreClockIsBehind(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	past := time.Now().Add(-24 * time.Hour)
	rt := protocol.New(memstore.New(&memstore.Config{Now: func() time.Time { return past }}), nil)
	defer rt.Close(ctx)
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: waitKey(), Owner: "holder", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiting, done, _ := startAcquireWait(wctx, rt, "waiter", protocol.WaitConfig{Recheck: time.Hour})
	start := time.Now()
	for range 6 {
		<-waiting
	}
	// Sleeps of 1, 2, 4, 8 and 16 ms separate six attempts; a spinning
	// waiter would get there in a fraction of that.
	if elapsed := time.Since(start); elapsed < 31*time.Millisecond {
		t.Fatalf("six attempts in %v: the waiter does not back off", elapsed)
	}
	cancel()
	if err := <-done; !errors.Is(err, protocol.ErrConflict) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want conflict and context.Canceled", err)
	}
}

func TestAcquireWaitRefusesInvalidAndClosed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt := protocol.New(memstore.New(nil), nil)
	res, err := rt.AcquireWait(ctx, protocol.AcquireRequest{Key: waitKey(), TTL: time.Minute}, nil)
	if res.Status != protocol.StatusInvalid || !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("wait without an owner: %q %v, want invalid", res.Status, err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = rt.AcquireWait(ctx, protocol.AcquireRequest{Key: waitKey(), Owner: "w", TTL: time.Minute}, nil)
	if res.Status != protocol.StatusClosed || !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("wait on a closed runtime: %q %v, want closed", res.Status, err)
	}
	if _, _, err := rt.Subscribe(ctx, waitKey()); !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("Subscribe on a closed runtime: %v, want closed", err)
	}
}

// Hold with Wait takes the key when its holder releases it, and keeps it.
func TestHoldWaits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	held, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: waitKey(), Owner: "holder", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	asleep := make(chan struct{}, 10)
	type outcome struct {
		h   *protocol.Held
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: waitKey(), Owner: "waiter", TTL: 3 * time.Second},
			&protocol.HoldConfig{Wait: &protocol.WaitConfig{Recheck: time.Hour, Waiting: func(protocol.Lease) { asleep <- struct{}{} }}})
		done <- outcome{h, err}
	}()
	<-asleep
	if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: waitKey(), Owner: "holder", Token: held.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("Hold with Wait: %v", o.err)
	}
	if o.h.Token() <= held.Lease.Token || o.h.Context().Err() != nil {
		t.Fatalf("Hold with Wait holds token %d (context %v), want a live lease after token %d", o.h.Token(), o.h.Context().Err(), held.Lease.Token)
	}
	if err := o.h.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}
