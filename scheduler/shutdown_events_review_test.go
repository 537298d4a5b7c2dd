package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// unansweredReleaseOfB answers the first release of target b unavailable
// without passing it on (the store cut off for a moment).
type unansweredReleaseOfB struct {
	protocol.Store
	failed atomic.Bool
}

func (s *unansweredReleaseOfB) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	if req.Key.Namespace == scheduler.DefaultNamespace && req.Key.Name == "b" && s.failed.CompareAndSwap(false, true) {
		return protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusUnavailable},
			backendkit.NewError(protocol.OpRelease, protocol.StatusUnavailable, errors.New("connection refused"), "store down")
	}
	return s.Store.Release(ctx, req)
}

// docs/scheduler.md: "Config.Observer receives an event per acquire, busy
// target, loss, hand-over, release and round". A target removed from the
// set whose release got no answer is released again at shutdown (and the
// store takes it): the observer must get its "released" event before Run
// returns, as it gets the one of every other lease released at shutdown.
func TestShutdownReleaseOfAnUnansweredReleaseIsObserved(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	store := &unansweredReleaseOfB{Store: rt}
	var mu sync.Mutex
	set := []string{"a", "b"}
	targets := func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return set, nil
	}
	var evMu sync.Mutex
	released := map[string]int{}
	obs := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		if ev.Kind == scheduler.EventReleased {
			evMu.Lock()
			released[ev.Target]++
			evMu.Unlock()
		}
	})
	s, err := scheduler.New(store, "w1", targets, idle,
		&scheduler.Config{TTL: 6 * time.Second, RenewEvery: 2 * time.Second, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, s)
	eventually(t, "holds a b", holds(s, "a", "b"))
	mu.Lock()
	set = []string{"a"}
	mu.Unlock()
	eventually(t, "the release of b tried", func() (bool, string) { return store.failed.Load(), "no release of b yet" })
	stop() // before the next round retries it: the shutdown does

	// The store did take the shutdown's release of b: b is free.
	res, err := rt.Get(context.Background(), protocol.GetRequest{Key: protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "b"}})
	if err == nil && res.Lease != nil {
		t.Fatalf("b still held after Run returned (token %d): the shutdown did not release it", res.Lease.Token)
	}
	evMu.Lock()
	defer evMu.Unlock()
	if released["a"] != 1 {
		t.Errorf("released events of a: %d; want 1", released["a"])
	}
	if released["b"] != 1 {
		t.Errorf("released events of b: %d; want 1: the shutdown released b but the observer never heard of it (events: %v)",
			released["b"], released)
	}
}
