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

// countingStore counts the subscriptions made through it.
type countingStore struct {
	*protocol.Runtime
	subscriptions int
}

func (c *countingStore) Subscribe(ctx context.Context, k protocol.Key) (<-chan struct{}, func(), error) {
	c.subscriptions++
	return c.Runtime.Subscribe(ctx, k)
}

// A free key costs one acquire and no subscription; a held one subscribes
// once however long the wait.
func TestAcquireWaitSubscribesOnlyAfterAConflict(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	s := &countingStore{Runtime: rt}
	res, err := protocol.AcquireWait(ctx, s, protocol.AcquireRequest{Key: waitKey(), Owner: "first", TTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.subscriptions != 0 {
		t.Fatalf("a wait for a free key subscribed %d times, want 0", s.subscriptions)
	}
	asleep := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		_, err := protocol.AcquireWait(ctx, s, protocol.AcquireRequest{Key: waitKey(), Owner: "second", TTL: time.Hour},
			&protocol.WaitConfig{Recheck: time.Hour, Waiting: func(protocol.Lease) { asleep <- struct{}{} }})
		done <- err
	}()
	<-asleep
	if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: waitKey(), Owner: "first", Token: res.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("wait: %v", err)
	}
	if s.subscriptions != 1 {
		t.Fatalf("a wait subscribed %d times, want 1", s.subscriptions)
	}
}

// gatedStore holds every acquire until gate closes, or, when gate is nil,
// until the acquire's own context ends.
type gatedStore struct {
	protocol.Store
	gate <-chan struct{}
}

func (g gatedStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if g.gate == nil {
		<-ctx.Done()
	} else {
		<-g.gate
	}
	return g.Store.Acquire(ctx, req)
}

// The wait's deadline bounds its sleeps, not an attempt in flight: an
// attempt still running when the deadline passes gets its answer (here
// acquired) instead of a timeout of unknown outcome. Cancelling the wait
// does cut an attempt short.
func TestAcquireWaitDeadlineLetsAnAttemptFinish(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)

	wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	res, err := protocol.AcquireWait(wctx, gatedStore{Store: rt, gate: wctx.Done()},
		protocol.AcquireRequest{Key: waitKey(), Owner: "w", TTL: time.Minute}, nil)
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("an attempt in flight when the wait's deadline passed answered %q %v, want acquired", res.Status, err)
	}

	cctx, cancelWait := context.WithCancel(ctx)
	go cancelWait()
	res, err = protocol.AcquireWait(cctx, gatedStore{Store: rt},
		protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "other"}, Owner: "w", TTL: time.Minute}, nil)
	if res.Status != protocol.StatusTimeout || !errors.Is(err, context.Canceled) {
		t.Fatalf("an attempt in flight when the wait was cancelled answered %q %v, want timeout (cancelled)", res.Status, err)
	}
}
