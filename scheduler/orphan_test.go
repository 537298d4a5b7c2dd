package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// silentAcquireStore lets every acquire of target take effect in the store
// (or replay) but, while silent is set, answers timeout: the answers are
// lost on the way back, and the worker cannot tell whether it holds the key.
type silentAcquireStore struct {
	protocol.Store
	target protocol.Key
	silent atomic.Bool
	mu     sync.Mutex
	taken  *protocol.Lease // the lease the first acquire took
}

func (s *silentAcquireStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := s.Store.Acquire(ctx, req)
	if req.Key != s.target || err != nil || !s.silent.Load() {
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
// scheduler forgot the request id, and the lease stayed. So with the
// membership: a join whose answer was lost is resent and released at
// shutdown (the old scheduler left the lease to count a worker that was
// gone).
func TestUnknownAcquireOfAnUnwantedTargetIsReleased(t *testing.T) {
	t.Parallel()
	target := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	member := protocol.Key{Namespace: scheduler.DefaultNamespace + scheduler.WorkersSuffix, Name: "w1"}
	for c, key := range map[string]protocol.Key{"stopped": target, "removed": target, "join stopped": member} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			rt := newStore(t)
			store := &silentAcquireStore{Store: rt, target: key}
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
			eventually(t, "an acquire of "+key.String()+" takes the lease and loses its answer", func() (bool, string) {
				taken = store.lost()
				return taken != nil, "no acquire yet"
			})
			if c != "removed" {
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
				res, err := rt.Get(context.Background(), protocol.GetRequest{Key: key})
				if err != nil && res.Status != protocol.StatusNotFound {
					t.Fatalf("get %s: %v", key, err)
				}
				if !sent.Before(taken.ExpiresAt) {
					t.Fatalf("%s: the lease on %s (token %d) that the lost acquire took stayed until it ran out", c, key, taken.Token)
				}
				if res.Status == protocol.StatusNotFound {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// lossyStore records when each acquire of a target was sent; acquires of
// the targets in silent take effect but their answers are lost, and
// releases of those in deaf get no answer (and do nothing).
type lossyStore struct {
	protocol.Store
	mu     sync.Mutex
	silent map[string]bool
	deaf   map[string]bool
	sent   map[string][]time.Time
	taken  map[string]protocol.Lease // by the first silent acquire
}

func newLossyStore(t *testing.T) *lossyStore {
	return &lossyStore{Store: newStore(t), silent: map[string]bool{}, deaf: map[string]bool{},
		sent: map[string][]time.Time{}, taken: map[string]protocol.Lease{}}
}

func (s *lossyStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	s.mu.Lock()
	if req.Key.Namespace == scheduler.DefaultNamespace {
		s.sent[req.Key.Name] = append(s.sent[req.Key.Name], time.Now())
	}
	silent := req.Key.Namespace == scheduler.DefaultNamespace && s.silent[req.Key.Name]
	s.mu.Unlock()
	res, err := s.Store.Acquire(ctx, req)
	if !silent || err != nil {
		return res, err
	}
	s.mu.Lock()
	if _, ok := s.taken[req.Key.Name]; !ok && res.Lease != nil {
		s.taken[req.Key.Name] = *res.Lease
	}
	s.mu.Unlock()
	return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, RequestID: res.RequestID},
		backendkit.NewError(protocol.OpAcquire, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
}

func (s *lossyStore) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	s.mu.Lock()
	deaf := req.Key.Namespace == scheduler.DefaultNamespace && s.deaf[req.Key.Name]
	s.mu.Unlock()
	if deaf {
		return protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusTimeout, RequestID: req.RequestID},
			backendkit.NewError(protocol.OpRelease, protocol.StatusTimeout, context.DeadlineExceeded, "no answer")
	}
	return s.Store.Release(ctx, req)
}

func (s *lossyStore) set(m map[string]bool, names []string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		m[n] = on
	}
}

func (s *lossyStore) lostLease(name string) (protocol.Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.taken[name]
	return l, ok
}

// acquiresSince counts the acquires of the names sent at or after t.
func (s *lossyStore) acquiresSince(t time.Time, names ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, name := range names {
		for _, at := range s.sent[name] {
			if !at.Before(t) {
				n++
			}
		}
	}
	return n
}

// run runs s with a cancel of its own and returns it and a channel closed
// when Run returned; the test's end cancels and waits.
func run(t *testing.T, s *scheduler.Scheduler) (cancel context.CancelFunc, done chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return cancel, done
}

// An acquire whose answer was lost is resent for a target no longer
// wanted only while a lease it took may still be live (TTL after the
// target left): after that a resend learns nothing worth knowing. The old
// scheduler resent it every round for ever.
func TestLostAcquireOfAnUnwantedTargetIsResentOnlyWhileItsLeaseMayLive(t *testing.T) {
	t.Parallel()
	store := newLossyStore(t)
	store.set(store.silent, []string{"t"}, true) // for good: no resend ever learns the outcome
	var removed atomic.Bool
	targets := func(context.Context) ([]string, error) {
		if removed.Load() {
			return []string{"u"}, nil
		}
		return []string{"t", "u"}, nil
	}
	s, err := scheduler.New(store, "w1", targets, idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, "an acquire of t takes the lease and loses its answer", func() (bool, string) {
		_, ok := store.lostLease("t")
		return ok, "no acquire of t yet"
	})
	r := time.Now()
	removed.Store(true)
	every := ttl / 3
	// The round that sees t gone comes within 1.1 × every; it resends
	// until TTL after that. A round later, nothing may be sent.
	quiet := r.Add(ttl + 2*every)
	time.Sleep(time.Until(quiet.Add(2 * every)))
	if n := store.acquiresSince(quiet, "t"); n > 0 {
		t.Errorf("%d acquires of t sent more than TTL + 2 rounds after t left the set; want none", n)
	}
}

// At shutdown, the acquires whose answer was lost are resent until the
// first that gets no answer: a store that does not answer costs the
// shutdown one OpTimeout, not one per such acquire. The old scheduler
// sent every one.
func TestLostAcquiresAtShutdownStopAtTheFirstUnanswered(t *testing.T) {
	t.Parallel()
	lost := []string{"t1", "t2", "t3", "t4", "t5"}
	store := newLossyStore(t)
	store.set(store.silent, lost, true)
	targets := func(context.Context) ([]string, error) {
		set := []string{"u"}
		for _, n := range lost {
			if _, ok := store.lostLease(n); !ok {
				set = append(set, n)
			}
		}
		return set, nil
	}
	s, err := scheduler.New(store, "w1", targets, idle, &scheduler.Config{TTL: 6 * time.Second, RenewEvery: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := run(t, s)
	eventually(t, "every acquire of t1..t5 takes its lease and loses its answer", func() (bool, string) {
		for _, n := range lost {
			if _, ok := store.lostLease(n); !ok {
				return false, n + " not acquired yet"
			}
		}
		return true, ""
	})
	stopped := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}
	// One resend by the shutdown, and one by a round under way when ctx
	// ended (a round's resends are not cut short).
	if n := store.acquiresSince(stopped, lost...); n > 2 {
		t.Errorf("%d acquires of t1..t5 sent after the stop to a store that answered none; want at most 2", n)
	}
}

// The shutdown's warning about a lease that a lost acquire took and that
// could not be released names the step that got no answer and the lease's
// token. The old one said the acquire's outcome was unknown, when the
// resent acquire had answered with the lease and only its release had
// not.
func TestShutdownNamesTheUnansweredRelease(t *testing.T) {
	t.Parallel()
	store := newLossyStore(t)
	store.set(store.silent, []string{"t"}, true)
	store.set(store.deaf, []string{"t"}, true)
	var logs syncbuf.Buffer
	s, err := scheduler.New(store, "w1", scheduler.Static("t", "u"), idle,
		&scheduler.Config{TTL: ttl, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := run(t, s)
	var taken protocol.Lease
	eventually(t, "an acquire of t takes the lease and loses its answer", func() (ok bool, _ string) {
		taken, ok = store.lostLease("t")
		return ok, "no acquire of t yet"
	})
	cancel()
	store.set(store.silent, []string{"t"}, false) // the shutdown's resend is answered
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}
	out := logs.String()
	if !strings.Contains(out, "unanswered=release") || !strings.Contains(out, fmt.Sprintf("token=%d", taken.Token)) {
		t.Errorf("the shutdown's logs do not say that the release of t (token %d) got no answer:\n%s", taken.Token, out)
	}
}

// A worker whose membership ran out by its clock while the lease is still
// live in the store (the renewals' answers lost) releases that lease, with
// its token, when it stops. The old scheduler released only a membership
// it knew it held, and left this one to count a worker that was gone.
func TestLapsedMembershipIsReleasedAtShutdown(t *testing.T) {
	t.Parallel()
	store := &dropRenewStore{Store: newStore(t)}
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := run(t, s)
	eventually(t, "joins and holds t", holds(s, "t"))
	store.drop.Store(true) // for good: the renewals (and the lapsed renew) take effect, unanswered
	eventually(t, "the membership runs out by the worker's clock", func() (bool, string) {
		snap := s.Snapshot()
		return !snap.Member, snap.Problem
	})
	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}
	key := protocol.Key{Namespace: scheduler.DefaultNamespace + scheduler.WorkersSuffix, Name: "w1"}
	res, err := store.Get(context.Background(), protocol.GetRequest{Key: key})
	if res.Status != protocol.StatusNotFound {
		t.Errorf("after the stop, the lapsed membership lease is %s (%v): want it released", res.Status, err)
	}
}
