package schedulertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// acquireLog passes calls to a store and notes when each acquire was sent,
// and how long each acquire and list took.
type acquireLog struct {
	protocol.Store
	sent sendTimes
	// calls logs how long each acquire and list took: a slow one says the
	// machine or the store, not the scheduler, set the pace.
	calls timings
}

func (a *acquireLog) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	began := time.Now()
	if req.Key.Namespace != scheduler.DefaultNamespace+scheduler.WorkersSuffix {
		a.sent.add(began)
	}
	defer func() { a.calls.add(time.Now(), time.Since(began)) }()
	return a.Store.Acquire(ctx, req)
}

func (a *acquireLog) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	began := time.Now()
	defer func() { a.calls.add(time.Now(), time.Since(began)) }()
	return a.Store.List(ctx, req)
}

// sendTimes records when requests were sent; it is safe for concurrent
// use.
type sendTimes struct {
	mu   sync.Mutex
	sent []time.Time
}

func (s *sendTimes) add(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, at)
}

// between returns how many requests were sent in [from, to).
func (s *sendTimes) between(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.sent {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// testLockDelayBackOff: after its target lease with a lock-delay is
// revoked, a worker tries the target once, learns from the conflict when
// the lock-delay ends, and tries again then, not before: the key has no
// holder to back off from, and the end of the delay is known. It takes
// the target within a third of a renew interval of that end (a worker
// that waited for its next round instead would be up to 1.1 renew
// intervals late), unless the machine was shown too loaded to say.
func testLockDelayBackOff(t *testing.T, newHarness Factory) {
	const delay = 3 * time.Second
	h := newHarness(t)
	admin := h.NewStore(t)
	store := &acquireLog{Store: h.NewStore(t)}
	var (
		mu      sync.Mutex
		tokens  []int64     // of the handlers started, in order
		started []time.Time // when each was called
		ended   int         // handlers whose context ended
	)
	handler := func(ctx context.Context, _ string, token int64) {
		mu.Lock()
		tokens = append(tokens, token)
		started = append(started, time.Now())
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		ended++
		mu.Unlock()
	}
	runOne(t, store, scheduler.Static("t"), handler, &scheduler.Config{TTL: ttl, LockDelay: delay})
	wait := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		waitUntil(t, what, within, cond)
	}
	wait("the handler runs", converge, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tokens) == 1
	})
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	probe := startLatenessProbe()
	defer probe.close()
	// The store ends the lease between these two moments; the delay ends
	// that long after (one machine, one clock).
	sent := time.Now()
	if _, err := admin.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "schedulertest", Reason: "lock-delay"}); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	free := time.Now().Add(delay)
	wait("the revoked lease's handler is cancelled", converge, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ended == 1
	})
	wait("the target is taken again", converge, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tokens) == 2
	})
	retaken := started[1]
	early := store.sent.between(sent, sent.Add(delay-expiryMarginTest))
	t.Logf("acquires of the target during its lock-delay of %v: %d; taken again %v after the delay ended",
		delay, early, retaken.Sub(free).Round(time.Millisecond))
	// The store judges the delay by its wall clock: so does this check
	// (Round(0) drops the monotonic reading). A wall clock slewed or
	// stepped against the monotonic one (seen once: 2.995s by the
	// monotonic clock) is not the store's error.
	if wall := retaken.Round(0).Sub(sent.Round(0)); wall < delay {
		t.Errorf("the target was taken again %v after the revoke by the wall clock (%v by the monotonic one), within its lock-delay of %v",
			wall, retaken.Sub(sent), delay)
	}
	if early > 1 {
		t.Errorf("%d acquires of the target while its lock-delay ran (known from the first conflict): want 1", early)
	}
	if late, bound := retaken.Sub(free), renewEvery/3+h.LateExpiry; late > bound {
		// The take waits for a timer, two lists and an acquire: one of them
		// late by more than lateCall says the machine was too loaded.
		from := free.Add(-expiryMarginTest)
		switch timer, call := probe.worst(from, retaken), store.calls.worst(from, retaken); {
		case timer > lateCall:
			t.Logf("the target was taken again %v after its lock-delay ended; not failed: a %v timer of this process woke up %v late meanwhile (more than %v): the machine is too loaded",
				late, latenessTick, timer.Round(time.Millisecond), lateCall)
		case call > lateCall:
			t.Logf("the target was taken again %v after its lock-delay ended; not failed: a list or an acquire took %v meanwhile (more than %v): the machine or the store is too loaded",
				late, call.Round(time.Millisecond), lateCall)
		default:
			t.Errorf("the target was taken again %v after its lock-delay ended: want within %v%s (%v)", late, renewEvery/3, h.lateness(), bound)
		}
	}
	if tokens[1] <= tokens[0] {
		t.Errorf("tokens %v: want the second greater", tokens)
	}
}

// expiryMarginTest leaves out acquires sent as the delay ends: the local
// clock and the store's may differ by that much.
const expiryMarginTest = 50 * time.Millisecond

// memberLockDelay passes calls to a store (its signal included) and gives
// every acquire of a membership lease a lock-delay, as a namespace default
// of the workers' runtime would (protocol.Config.LockDelays); it notes
// when each such acquire was sent.
type memberLockDelay struct {
	protocol.Store
	notifier protocol.Notifier
	delay    time.Duration
	sent     sendTimes // membership acquires
}

func (m *memberLockDelay) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	return m.notifier.Subscribe(ctx, key)
}

func (m *memberLockDelay) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if strings.HasSuffix(req.Key.Namespace, scheduler.WorkersSuffix) {
		if req.LockDelay == 0 {
			req.LockDelay = m.delay
		}
		m.sent.add(time.Now())
	}
	return m.Store.Acquire(ctx, req)
}

// testMembershipRevokeLockDelay: an operator's revoke of a worker's
// membership lease that carries a lock-delay (the workers' namespace
// default) is heard at once (the worker no longer counts itself a
// member); the worker does not join again before the delay ends, as the
// store judges, and does not spin meanwhile: it tries at once, then at
// most once a round (each round's join, in case the store's clock is
// ahead of its own), and joins within a third of a renew interval of the
// delay's end (unless a timer of the test process woke up more than
// lateCall late: then that is logged). Its target leases, another
// matter, stay its own.
func testMembershipRevokeLockDelay(t *testing.T, newHarness Factory) {
	const (
		ns    = "evict"
		delay = 3 * time.Second
	)
	h := newHarness(t)
	inner, admin := workerAndAdmin(t, h)
	n, ok := inner.(protocol.Notifier)
	if !ok {
		t.Fatalf("the harness's store %T does not signal (protocol.Notifier)", inner)
	}
	store := &memberLockDelay{Store: inner, notifier: n, delay: delay}
	sched := runOne(t, store, scheduler.Static("a", "b"), idle, &scheduler.Config{Namespace: ns, TTL: ttl})
	waitUntil(t, "the worker is a member and holds a and b", converge, func() bool {
		snap := sched.Snapshot()
		return snap.Member && fmt.Sprint(snap.Held()) == "[a b]"
	})
	ctx := context.Background()
	member := protocol.Key{Namespace: ns + scheduler.WorkersSuffix, Name: "w1"}
	got, err := admin.Get(ctx, protocol.GetRequest{Key: member})
	if err != nil || got.Lease == nil || got.Lease.Owner != "w1" || got.Lease.LockDelay != delay {
		t.Fatalf("get %s: %+v, %v; want w1's membership lease with a lock-delay of %v", member, got.Lease, err, delay)
	}
	old := got.Lease.Token
	probe := startLatenessProbe()
	defer probe.close()
	sent := time.Now()
	if res, err := admin.Revoke(ctx, protocol.RevokeRequest{Key: member, Actor: "op", Reason: "evict", Token: old}); err != nil {
		t.Fatalf("revoke %s/%d: %v (%s)", member, old, err, res.Status)
	}
	free := time.Now().Add(delay)
	waitUntil(t, "the worker hears of the revoke and no longer counts itself a member", lossBound, func() bool {
		return !sched.Snapshot().Member
	})
	var joined protocol.Lease
	waitUntil(t, "the worker joins again", converge, func() bool {
		got, err := admin.Get(ctx, protocol.GetRequest{Key: member})
		if err != nil || got.Lease == nil || got.Lease.Owner != "w1" || got.Lease.Token <= old {
			return false
		}
		joined = *got.Lease
		return true
	})
	rejoined := time.Now()
	during := store.sent.between(sent, sent.Add(delay-expiryMarginTest))
	t.Logf("membership acquires during its lock-delay of %v: %d; joined again (token %d) at most %v after the delay ended",
		delay, during, joined.Token, rejoined.Sub(free).Round(time.Millisecond))
	// The store judges the delay by its wall clock: so does this check.
	if wall := joined.AcquiredAt.Sub(sent.Round(0)); wall < delay {
		t.Errorf("the worker joined again %v after the revoke by the store's clock, within the lock-delay of %v", wall, delay)
	}
	if most := 1 + int(delay/(renewEvery*9/10)) + 1; during > most {
		t.Errorf("%d membership acquires while the lock-delay of %v ran: want at most %d (one at once, one a round)", during, delay, most)
	}
	if late, bound := rejoined.Sub(free), renewEvery/3+h.LateExpiry; late > bound {
		from := free.Add(-expiryMarginTest)
		if timer := probe.worst(from, rejoined); timer > lateCall {
			t.Logf("joined again %v after the lock-delay ended; not failed: a %v timer of this process woke up %v late meanwhile (more than %v): the machine is too loaded",
				late, latenessTick, timer.Round(time.Millisecond), lateCall)
		} else {
			t.Errorf("joined again %v after the lock-delay ended: want within %v%s (%v)", late, renewEvery/3, h.lateness(), bound)
		}
	}
	if held := sched.Snapshot().Held(); fmt.Sprint(held) != "[a b]" {
		t.Errorf("the worker holds %v after it joined again; want its targets [a b], which the revoke of its membership left alone", held)
	}
}
