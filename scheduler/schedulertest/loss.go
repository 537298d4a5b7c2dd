package schedulertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// runOne runs a scheduler "w1" with cfg (its logger set to the test's log,
// warnings and above) until the test ends, and returns it.
func runOne(t *testing.T, store protocol.Store, targets scheduler.Targets, handler scheduler.Handler, cfg *scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sched, err := scheduler.New(store, "w1", targets, handler, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sched
}

// waitUntil polls cond every millisecond until it holds, and returns how
// long that took; it fails t when within passes first.
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// Timing of the cases where a worker must hear a loss through the store's
// signal: renewals (every lossRenew) come long after lossBound.
const (
	lossTTL   = time.Minute
	lossRenew = 20 * time.Second
	lossBound = 5 * time.Second // generous on a loaded machine; figures in internal/testkit/wakebench
)

// testHearsRevoke: a worker renewing every 20 s hears of a revoke of one
// of its targets through the store's signal: that handler's context ends,
// with a cause matching protocol.ErrLeaseLost, within lossBound, long
// before the next renewal; the other handlers run on.
func testHearsRevoke(t *testing.T, newHarness Factory) {
	h := newHarness(t)
	store, admin := workerAndAdmin(t, h)
	var (
		mu    sync.Mutex
		ended = map[string]error{} // target -> cause, when its handler's context ended
		runs  = map[string]int64{} // target -> token of the running handler
	)
	handler := func(ctx context.Context, target string, token int64) {
		mu.Lock()
		runs[target] = token
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		ended[target] = context.Cause(ctx)
		mu.Unlock()
	}
	targets := []string{"a", "b", "c"}
	runOne(t, store, scheduler.Static(targets...), handler,
		&scheduler.Config{Namespace: "loss", TTL: lossTTL, RenewEvery: lossRenew})
	wait := func(what string, within time.Duration, cond func() bool) time.Duration {
		t.Helper()
		return waitUntil(t, what, within, cond)
	}
	wait("every handler runs", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == len(targets)
	})
	start := time.Now()
	res, err := admin.Revoke(context.Background(), protocol.RevokeRequest{
		Key: protocol.Key{Namespace: "loss", Name: "b"}, Actor: "op", Reason: "test"})
	if err != nil {
		t.Fatalf("revoke: %v (%s)", err, res.Status)
	}
	took := wait("the revoked target's handler hears of it", lossBound, func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := ended["b"]
		return ok
	})
	t.Logf("revoke to the handler's context done: %v (since the revoke returned: %v)", time.Since(start), took)
	mu.Lock()
	defer mu.Unlock()
	if cause := ended["b"]; !errors.Is(cause, protocol.ErrLeaseLost) {
		t.Fatalf("the revoked target's handler ended with %v, want a loss", cause)
	}
	for _, other := range []string{"a", "c"} {
		if cause, ok := ended[other]; ok {
			t.Fatalf("target %s's handler ended too: %v", other, cause)
		}
	}
}

// testHearsRevokeWhileHandingOver: a worker renewing every 20 s that hands
// a target over to rebalance (its handler cancelled, still finishing, the
// lease kept until it returns) hears of a revoke of that lease through the
// store's signal too: the snapshot shows the target lost, and the observer
// hears EventLost with a cause matching protocol.ErrLeaseLost, within
// lossBound, long before the next renewal.
func testHearsRevokeWhileHandingOver(t *testing.T, newHarness Factory) {
	const ns = "handover"
	h := newHarness(t)
	store, admin := workerAndAdmin(t, h)
	ctx := context.Background()
	// c is held elsewhere for a moment: the worker takes a and b, and
	// looks again when c's lease runs out.
	if _, err := admin.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: ns, Name: "c"}, Owner: "other", TTL: 3 * time.Second}); err != nil {
		t.Fatalf("acquire c: %v", err)
	}
	gate := make(chan struct{})
	var (
		mu         sync.Mutex
		handedOver []string          // targets whose handler was cancelled to rebalance
		lost       []scheduler.Event // EventLost, as the observer heard them
	)
	handler := func(ctx context.Context, target string, _ int64) {
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), scheduler.ErrHandedOver) {
			mu.Lock()
			handedOver = append(handedOver, target)
			mu.Unlock()
			<-gate // a handler slow to finish
		}
	}
	observer := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		if ev.Kind == scheduler.EventLost {
			mu.Lock()
			lost = append(lost, ev)
			mu.Unlock()
		}
	})
	sched := runOne(t, store, scheduler.Static("a", "b", "c"), handler,
		&scheduler.Config{Namespace: ns, TTL: lossTTL, RenewEvery: lossRenew, Observer: observer})
	t.Cleanup(func() { close(gate) }) // before runOne's cleanup, which waits for the handlers
	waitUntil(t, "the worker holds a and b", 10*time.Second, func() bool {
		return fmt.Sprint(sched.Snapshot().Held()) == "[a b]"
	})
	// Two more workers join: when c's lease runs out the worker looks
	// again, counts three, and hands one of a and b over.
	for _, w := range []string{"w8", "w9"} {
		if _, err := admin.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: ns + scheduler.WorkersSuffix, Name: w}, Owner: w, TTL: lossTTL}); err != nil {
			t.Fatalf("acquire membership %s: %v", w, err)
		}
	}
	var target string
	waitUntil(t, "the worker hands a target over", 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(handedOver) == 0 {
			return false
		}
		target = handedOver[0]
		return true
	})
	var token int64
	for _, o := range sched.Snapshot().Owned {
		if o.Target == target {
			if o.State != scheduler.StateHandingOver {
				t.Fatalf("%s: state %s, want %s", target, o.State, scheduler.StateHandingOver)
			}
			token = o.Token
		}
	}
	if token == 0 {
		t.Fatalf("%s is not in the snapshot: %+v", target, sched.Snapshot().Owned)
	}
	res, err := admin.Revoke(ctx, protocol.RevokeRequest{Key: protocol.Key{Namespace: ns, Name: target}, Actor: "op", Reason: "test", Token: token})
	if err != nil {
		t.Fatalf("revoke %s/%d: %v (%s)", target, token, err, res.Status)
	}
	took := waitUntil(t, "the worker hears of the revoke of the target it hands over", lossBound, func() bool {
		for _, o := range sched.Snapshot().Owned {
			if o.Target == target && o.State == scheduler.StateLost {
				return true
			}
		}
		return false
	})
	t.Logf("revoke to the snapshot showing %s lost: %v", target, took)
	// The observer hears events after the snapshot changed (the scheduler
	// queues them and delivers them from its loop): wait for it too.
	var ev *scheduler.Event
	heard := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range lost {
			if lost[i].Target == target && lost[i].Token == token {
				ev = &lost[i]
			}
		}
		return ev != nil
	}
	deadline := time.Now().Add(lossBound)
	for !heard() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if ev == nil || !errors.Is(ev.Cause, protocol.ErrLeaseLost) {
		t.Fatalf("the observer heard %+v within %v of the snapshot; want EventLost of %s/%d with a cause matching protocol.ErrLeaseLost",
			lost, lossBound, target, token)
	}
}

// joinGate passes calls to a store (its signal included) and, once armed,
// holds every acquire of a membership lease until opened: a worker that
// lost its membership cannot join again meanwhile.
type joinGate struct {
	protocol.Store
	notifier protocol.Notifier
	armed    atomic.Bool
	waiting  atomic.Int32 // acquires held at the gate now
	gate     chan struct{}
	once     sync.Once
}

func (g *joinGate) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	return g.notifier.Subscribe(ctx, key)
}

func (g *joinGate) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if g.armed.Load() && strings.HasSuffix(req.Key.Namespace, scheduler.WorkersSuffix) {
		g.waiting.Add(1)
		select {
		case <-g.gate:
		case <-ctx.Done():
		}
		g.waiting.Add(-1)
	}
	return g.Store.Acquire(ctx, req)
}

func (g *joinGate) open() { g.once.Do(func() { close(g.gate) }) }

// testHearsMembershipRevoke: a worker renewing every 20 s whose membership
// lease is revoked (an operator's `leasectl revoke`) hears of it through
// the store's signal, as of a target lease: within lossBound, long before
// the next renewal, it no longer counts itself a member (the snapshot says
// so while it cannot join again) and it tries to join again at once; once
// it can, it holds a new membership lease.
func testHearsMembershipRevoke(t *testing.T, newHarness Factory) {
	const ns = "membership"
	h := newHarness(t)
	inner, admin := workerAndAdmin(t, h)
	n, ok := inner.(protocol.Notifier)
	if !ok {
		t.Fatalf("the harness's store %T does not signal (protocol.Notifier)", inner)
	}
	store := &joinGate{Store: inner, notifier: n, gate: make(chan struct{})}
	sched := runOne(t, store, scheduler.Static("a", "b"), idle,
		&scheduler.Config{Namespace: ns, TTL: lossTTL, RenewEvery: lossRenew})
	t.Cleanup(store.open) // before runOne's cleanup
	waitUntil(t, "the worker is a member and holds a and b", 10*time.Second, func() bool {
		snap := sched.Snapshot()
		return snap.Member && fmt.Sprint(snap.Held()) == "[a b]"
	})
	ctx := context.Background()
	member := protocol.Key{Namespace: ns + scheduler.WorkersSuffix, Name: "w1"}
	got, err := admin.Get(ctx, protocol.GetRequest{Key: member})
	if err != nil || got.Lease == nil || got.Lease.Owner != "w1" {
		t.Fatalf("get %s: %+v, %v; want w1's membership lease", member, got.Lease, err)
	}
	old := got.Lease.Token
	store.armed.Store(true)
	res, err := admin.Revoke(ctx, protocol.RevokeRequest{Key: member, Actor: "op", Reason: "test", Token: old})
	if err != nil {
		t.Fatalf("revoke %s/%d: %v (%s)", member, old, err, res.Status)
	}
	took := waitUntil(t, "the worker hears of the revoke of its membership lease and no longer counts itself a member", lossBound, func() bool {
		return !sched.Snapshot().Member
	})
	t.Logf("revoke to the snapshot saying not a member: %v", took)
	waitUntil(t, "the worker tries to join again", lossBound, func() bool { return store.waiting.Load() > 0 })
	store.open()
	waitUntil(t, "the worker joins again", lossBound, func() bool {
		if !sched.Snapshot().Member {
			return false
		}
		got, err := admin.Get(ctx, protocol.GetRequest{Key: member})
		return err == nil && got.Lease != nil && got.Lease.Owner == "w1" && got.Lease.Token > old
	})
}

func idle(ctx context.Context, _ string, _ int64) { <-ctx.Done() }

// workerAndAdmin returns two stores of h, closed when the test ends: one
// for the worker under test, one for the test's own operations (an
// operator's revoke, other workers' memberships).
func workerAndAdmin(t *testing.T, h Harness) (worker, admin protocol.Store) {
	t.Helper()
	worker, admin = h.NewStore(t), h.NewStore(t)
	t.Cleanup(func() {
		_ = worker.Close(context.Background())
		_ = admin.Close(context.Background())
	})
	return worker, admin
}
