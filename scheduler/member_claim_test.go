package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// revokeInClaim revokes the worker's membership lease while its first
// target acquire is under way, and returns that acquire only once the
// worker has heard of the revoke (its snapshot says it is no member); it
// notes every target acquire sent while the worker is no member.
type revokeInClaim struct {
	*protocol.Runtime
	sched func() *scheduler.Scheduler
	once  sync.Once
	heard chan struct{} // closed once the worker heard of the revoke

	mu            sync.Mutex
	whileNoMember []string // targets acquired while the worker said it was no member
}

func (s *revokeInClaim) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if req.Key.Namespace != scheduler.DefaultNamespace {
		return s.Runtime.Acquire(ctx, req)
	}
	if !s.sched().Snapshot().Member {
		s.mu.Lock()
		s.whileNoMember = append(s.whileNoMember, req.Key.Name)
		s.mu.Unlock()
	}
	res, err := s.Runtime.Acquire(ctx, req)
	s.once.Do(func() {
		member := protocol.Key{Namespace: scheduler.DefaultNamespace + scheduler.WorkersSuffix, Name: "w1"}
		if _, err := s.Runtime.Revoke(ctx, protocol.RevokeRequest{Key: member, Actor: "op", Reason: "evict"}); err != nil {
			panic(err)
		}
		for deadline := time.Now().Add(waitFor); s.sched().Snapshot().Member; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				panic("the worker did not hear of the revoke of its membership")
			}
		}
		close(s.heard)
	})
	return res, err
}

// A worker that is no longer a member claims no more targets, also when it
// hears of that in the middle of a claim: here its membership lease is
// revoked (and kept from it by the workers' namespace's lock-delay) while
// its first target acquire of the round is under way, and it learns of the
// revoke before that acquire returns. The claim then stops: no target is
// acquired until the worker is a member again.
func TestNoClaimOnceNoMember(t *testing.T) {
	t.Parallel()
	const delay = 3 * time.Second
	rt := protocol.New(memstore.New(nil), &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{
		{Namespaces: scheduler.DefaultNamespace + scheduler.WorkersSuffix, Delay: delay}}})
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	var sched *scheduler.Scheduler
	store := &revokeInClaim{Runtime: rt, sched: func() *scheduler.Scheduler { return sched }, heard: make(chan struct{})}
	targets := make([]string, 10)
	for i := range targets {
		targets[i] = string(rune('a' + i))
	}
	s, err := scheduler.New(store, "w1", scheduler.Static(targets...), idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	sched = s
	start(t, s)
	select {
	case <-store.heard:
	case <-time.After(waitFor):
		t.Fatal("no target acquire")
	}
	eventually(t, "member again after the lock-delay", func() (bool, string) {
		snap := s.Snapshot()
		return snap.Member, snap.Problem
	})
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.whileNoMember) > 0 {
		t.Errorf("the worker acquired %v after it heard that it was no longer a member: want none until it joined again", store.whileNoMember)
	}
}
