package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// leaselessRenew is a store whose renewals take effect but answer
// renewed without the lease, as a served store may ("lease": null).
type leaselessRenew struct{ *protocol.Runtime }

func (s leaselessRenew) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := s.Runtime.Renew(ctx, req)
	if err == nil {
		res.Lease = nil
	}
	return res, err
}

// A renewal answered renewed renewed the lease, with or without a copy of
// it in the answer (as Hold takes it: "An answer without the lease ...
// still renewed it"): the worker keeps the lease, and its handler runs
// on, instead of taking the renewal for one without an answer and losing
// (and releasing) the lease at its local deadline, one TTL after the
// acquire.
func TestRenewedWithoutTheLeaseKeepsIt(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	const lttl = 600 * time.Millisecond
	handlerCtx := make(chan context.Context, 4)
	s, err := scheduler.New(leaselessRenew{rt}, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		handlerCtx <- ctx
		<-ctx.Done()
	}, &scheduler.Config{TTL: lttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	var hctx context.Context
	select {
	case hctx = <-handlerCtx:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of t never ran")
	}
	select {
	case <-hctx.Done():
		t.Fatalf("t's handler was cancelled while its renewals took effect: %v", context.Cause(hctx))
	case <-time.After(3 * lttl):
	}
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	if res, err := rt.Get(context.Background(), protocol.GetRequest{Key: key}); err != nil || res.Lease.Owner != "w1" {
		t.Fatalf("get t: %v %v; want it held by w1", res, err)
	}
}

// losesFirstTargetAcquire is leaselessRenew whose first acquire of a
// target takes effect and answers timeout (its answer lost): the worker
// sends it again, replayed, and confirms the replay with a renew that
// answers renewed without the lease.
type losesFirstTargetAcquire struct {
	leaselessRenew
	mu    sync.Mutex
	lost  bool
	token int64 // the lease the lost answer carried
}

func (s *losesFirstTargetAcquire) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := s.Runtime.Acquire(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !s.lost && req.Key.Namespace == scheduler.DefaultNamespace {
		s.lost, s.token = true, res.Lease.Token
		return protocol.Result{Status: protocol.StatusTimeout}, &protocol.Error{Op: protocol.OpAcquire, Status: protocol.StatusTimeout,
			Key: req.Key, Message: "the answer was lost"}
	}
	return res, err
}

// A replayed acquire confirmed by a renew answered renewed without the
// lease is the worker's lease: its handler runs with that token, not
// after the lease ran out (backed off as a refused acquire, while the
// worker's own lease kept the target from every worker).
func TestReplayConfirmedWithoutTheLeaseRuns(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	const lttl = 3 * time.Second
	store := &losesFirstTargetAcquire{leaselessRenew: leaselessRenew{rt}}
	tokens := make(chan int64, 4)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, token int64) {
		tokens <- token
		<-ctx.Done()
	}, &scheduler.Config{TTL: lttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	select {
	case got := <-tokens:
		store.mu.Lock()
		want := store.token
		store.mu.Unlock()
		if got != want {
			t.Fatalf("t's handler ran with token %d; want %d, the lease the replayed acquire holds", got, want)
		}
	case <-time.After(lttl / 2):
		t.Fatalf("t's handler did not run within %s of the start; want it run with the replayed acquire's lease at the next round", lttl/2)
	}
}
