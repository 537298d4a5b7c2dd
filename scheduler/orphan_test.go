package scheduler_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// silentAcquireStore lets every acquire of target take effect in the store
// (or replay) but, while silent is set, answers timeout: the answers are
// lost on the way back, and the worker cannot tell whether it holds the key.
type silentAcquireStore struct {
	protocol.Store
	target string
	silent atomic.Bool
	mu     sync.Mutex
	taken  *protocol.Lease // the lease the first acquire took
}

func (s *silentAcquireStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := s.Store.Acquire(ctx, req)
	if req.Key.Name != s.target || err != nil || !s.silent.Load() {
		return res, err
	}
	s.mu.Lock()
	if s.taken == nil {
		s.taken = res.Lease
	}
	s.mu.Unlock()
	return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, RequestID: res.RequestID},
		backendkit.NewError(protocol.OpAcquire, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
}

func (s *silentAcquireStore) lost() *protocol.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taken
}

// An acquire whose answer was lost may have taken the lease: when its
// target is no longer wanted (removed from the set, or the scheduler
// stops) before a retry learned the outcome, the worker sends it again
// with its request id and releases what it took, rather than leave the
// lease to keep the target from every worker until it runs out. The old
// scheduler forgot the request id, and the lease stayed.
func TestUnknownAcquireOfAnUnwantedTargetIsReleased(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"stopped", "removed"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			rt := newStore(t)
			store := &silentAcquireStore{Store: rt, target: "t"}
			store.silent.Store(true)
			var removed atomic.Bool
			targets := func(context.Context) ([]string, error) {
				if removed.Load() {
					// From the round that sees t gone, answers come back;
					// every retry before it was silent.
					store.silent.Store(false)
					return []string{"u"}, nil
				}
				return []string{"t", "u"}, nil
			}
			s, err := scheduler.New(store, "w1", targets, func(ctx context.Context, _ string, _ int64) { <-ctx.Done() },
				&scheduler.Config{TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = s.Run(ctx); close(done) }()
			t.Cleanup(func() {
				cancel()
				store.silent.Store(false)
				<-done
			})
			var taken *protocol.Lease
			eventually(t, "an acquire of t takes the lease and loses its answer", func() (bool, string) {
				taken = store.lost()
				return taken != nil, "no acquire of t yet"
			})
			if c == "stopped" {
				cancel() // then answers come back, for the shutdown
				store.silent.Store(false)
				select {
				case <-done:
				case <-time.After(waitFor):
					t.Fatal("Run did not return")
				}
			} else {
				removed.Store(true)
			}
			// The lease must be gone by a get sent before it would have
			// run out.
			for {
				sent := time.Now()
				res, err := rt.Get(context.Background(), protocol.GetRequest{Key: protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}})
				if err != nil && res.Status != protocol.StatusNotFound {
					t.Fatalf("get t: %v", err)
				}
				if !sent.Before(taken.ExpiresAt) {
					t.Fatalf("%s: the lease on t (token %d) that the lost acquire took stayed until it ran out", c, taken.Token)
				}
				if res.Status == protocol.StatusNotFound {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
