package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// refusalClock is lostAnswerStore that also notes when a renewal of its
// target was refused.
type refusalClock struct {
	*lostAnswerStore
	mu      sync.Mutex
	refused time.Time
}

func (s *refusalClock) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := s.lostAnswerStore.Renew(ctx, req)
	if req.Key.Name == s.target && err != nil {
		s.mu.Lock()
		if s.refused.IsZero() {
			s.refused = time.Now()
		}
		s.mu.Unlock()
	}
	return res, err
}

// An acquire whose answer was lost took the lease; before the worker
// resends it, the lease ends (an operator's revoke, without lock-delay).
// The resend is replayed and its confirming renew is refused: the replay
// is history, the target is free, and the worker is below its share (one
// worker, one target). That is not a conflict with another worker, so the
// worker should acquire the target anew with a fresh request id at once
// (as protocol's confirm says: "acquire with a new request id"), not back
// off from a free target for RenewEvery × [0.5, 1.5) as after a conflict.
func TestRefusedReplayConfirmationDoesNotBackOffAFreeTarget(t *testing.T) {
	t.Parallel()
	const every = time.Second // ttl/3
	inner := &lostAnswerStore{Store: newStore(t), target: "t"}
	store := &refusalClock{lostAnswerStore: inner}
	started := make(chan time.Time, 10)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		started <- time.Now()
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl, RenewEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "the first acquire of t, its answer lost", func() (bool, string) {
		inner.mu.Lock()
		defer inner.mu.Unlock()
		return inner.lost != nil, "not yet"
	})
	inner.mu.Lock()
	lost := *inner.lost
	inner.mu.Unlock()
	if _, err := inner.Store.Revoke(t.Context(), protocol.RevokeRequest{Key: lost.Lease.Key, Actor: "operator", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	var began time.Time
	select {
	case began = <-started:
	case <-time.After(waitFor):
		t.Fatal("the handler never started")
	}
	store.mu.Lock()
	refused := store.refused
	store.mu.Unlock()
	if refused.IsZero() {
		t.Fatal("no renewal of t was refused: the replay was not confirmed as the test expects")
	}
	if gap := began.Sub(refused); gap > every/2 {
		t.Errorf("the handler of the free target t started %v after the confirmation of the replayed acquire was refused; want it acquired anew at once (within %v), not backed off",
			gap.Round(time.Millisecond), every/2)
	}
}
