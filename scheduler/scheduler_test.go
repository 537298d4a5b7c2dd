package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

const (
	// ttl is long beside a memstore operation but short enough for rounds
	// (every ttl/3) to come quickly; a loaded machine must not make a
	// worker lose a lease for want of CPU in these tests.
	ttl     = 3 * time.Second
	waitFor = 30 * time.Second // generous: only a scheduler that never gets there fails
)

func newStore(t *testing.T) *protocol.Runtime {
	rt := protocol.New(memstore.New(nil), nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

func idle(ctx context.Context, _ string, _ int64) { <-ctx.Done() }

// start runs s until the test ends (or stop is called) and returns stop.
func start(t *testing.T, s *scheduler.Scheduler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(waitFor):
				t.Fatal("Run did not return")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, waitFor, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func holds(s *scheduler.Scheduler, want ...string) func() (bool, string) {
	return func() (bool, string) {
		snap := s.Snapshot()
		got := snap.Held()
		return fmt.Sprint(got) == fmt.Sprint(want) && len(snap.Owned) == len(want), fmt.Sprintf("owned %+v; problem %q", snap.Owned, snap.Problem)
	}
}

func TestNewRefusesBadArguments(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ok := scheduler.Static("a")
	for _, c := range []struct {
		name     string
		store    protocol.Store
		identity string
		targets  scheduler.Targets
		handler  scheduler.Handler
		cfg      *scheduler.Config
		want     []string
	}{
		{"nil store", nil, "w", ok, idle, nil, []string{"store: must not be nil"}},
		{"empty identity", store, "", ok, idle, nil, []string{"identity: must not be empty"}},
		{"identity with a control character", store, "w\n1", ok, idle, nil, []string{"identity:"}},
		{"nil targets", store, "w", nil, idle, nil, []string{"targets: must not be nil"}},
		{"nil handler", store, "w", ok, nil, nil, []string{"handler: must not be nil"}},
		{"one namespace for both", store, "w", ok, idle, &scheduler.Config{Namespace: "x", WorkersNamespace: "x"},
			[]string{"workers namespace: must differ"}},
		{"namespace too long", store, "w", ok, idle, &scheduler.Config{Namespace: strings.Repeat("n", 200)}, []string{"namespace:"}},
		// The workers' namespace the default makes of it must fit too: the
		// error says where it came from and what to set.
		{"namespace too long for the workers' default", store, "w", ok, idle, &scheduler.Config{Namespace: strings.Repeat("n", 125)},
			[]string{"workers namespace: Namespace + \".workers\" is 133 bytes", "set WorkersNamespace or a shorter Namespace"}},
		{"negative ttl", store, "w", ok, idle, &scheduler.Config{TTL: -time.Second}, []string{"ttl:"}},
		{"renewals not shorter than the ttl", store, "w", ok, idle, &scheduler.Config{TTL: time.Second, RenewEvery: time.Second},
			[]string{"renew every: 1s with op timeout 1s", "after the ttl 1s", "set it to at most 625ms (with the default OpTimeout)"}},
		// Rounds come up to 10% late (jitter): at 950ms of a 1s TTL, one
		// round in four came after the lease ran out, with no fault at all;
		// at 480ms of 500ms a lone worker lost its lease 4 times in 5 s.
		{"renewals too close to the ttl", store, "w", ok, idle, &scheduler.Config{TTL: time.Second, RenewEvery: 950 * time.Millisecond},
			[]string{"renew every: 950ms with op timeout 950ms", "ends 1.995s after the last one was sent, after the ttl 1s", "at most 625ms"}},
		{"renewals at 480ms of 500ms", store, "w", ok, idle, &scheduler.Config{TTL: 500 * time.Millisecond, RenewEvery: 480 * time.Millisecond},
			[]string{"renew every: 480ms with op timeout 480ms", "at most 312ms"}},
		// A renewal sent 22s after the last one, answered 20s later, lands
		// 12s after a 30s lease ran out; the default OpTimeout does not
		// shorten to 8s, under half of RenewEvery.
		{"renewals that may land after the lease ran out", store, "w", ok, idle, &scheduler.Config{TTL: 30 * time.Second, RenewEvery: 20 * time.Second},
			[]string{"renew every: 20s with op timeout 20s", "ends 42s after", "at most 18.75s (with the default OpTimeout), or OpTimeout to at most 8s"}},
		{"renewals with a long op timeout", store, "w", ok, idle, &scheduler.Config{TTL: 30 * time.Second, RenewEvery: 10 * time.Second, OpTimeout: 20 * time.Second},
			[]string{"renew every: 10s with op timeout 20s", "set it to at most 9.09s, or OpTimeout to at most 19s"}},
		{"negative op timeout", store, "w", ok, idle, &scheduler.Config{OpTimeout: -1}, []string{"op timeout:"}},
		// One list or acquire waiting that long holds a round, and the
		// renewals of the next, past the leases' expiry.
		{"op timeout not shorter than the ttl", store, "w", ok, idle, &scheduler.Config{TTL: 15 * time.Second, OpTimeout: time.Minute},
			[]string{"op timeout: 1m is not shorter than the ttl 15s"}},
		{"negative max backoff", store, "w", ok, idle, &scheduler.Config{MaxBackoff: -1}, []string{"max backoff:"}},
		{"everything at once", nil, "", nil, nil, &scheduler.Config{TTL: -1},
			[]string{"store:", "identity:", "targets:", "handler:", "ttl:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := scheduler.New(c.store, c.identity, c.targets, c.handler, c.cfg)
			if err == nil || s != nil {
				t.Fatalf("New accepted it: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "scheduler: new: ") {
				t.Errorf("error %q does not start with the package's prefix", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// New takes every RenewEvery whose renewals land before the lease runs
// out, even sent as late as the jitter allows and answered as late as
// OpTimeout allows: RenewEvery × 1.1 + OpTimeout within the TTL.
func TestNewTakesRenewalsThatLandInTime(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	for _, cfg := range []scheduler.Config{
		{TTL: 30 * time.Second, RenewEvery: 20 * time.Second, OpTimeout: 8 * time.Second}, // 22s + 8s
		{TTL: 30 * time.Second, RenewEvery: 20 * time.Second, OpTimeout: time.Second},
		{TTL: 21 * time.Second, RenewEvery: 10 * time.Second},                                     // 11s + 10s
		{TTL: 15 * time.Second, RenewEvery: 7 * time.Second},                                      // 7.7s + 7s
		{TTL: 30 * time.Second, RenewEvery: 15 * time.Second},                                     // 16.5s + the default shortened to 13.5s
		{TTL: 30 * time.Second, RenewEvery: 18 * time.Second},                                     // 19.8s + 10.2s
		{TTL: time.Second, RenewEvery: 800 * time.Millisecond, OpTimeout: 100 * time.Millisecond}, // 880ms + 100ms
	} {
		if _, err := scheduler.New(store, "w", scheduler.Static("a"), idle, &cfg); err != nil {
			t.Errorf("TTL %v, RenewEvery %v, OpTimeout %v: %v", cfg.TTL, cfg.RenewEvery, cfg.OpTimeout, err)
		}
	}
}

// With a nil Config: namespace "scheduler", workers in "scheduler.workers",
// 15s leases; shutdown releases both.
func TestDefaults(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	ctx := context.Background()
	for _, key := range []protocol.Key{{Namespace: "scheduler", Name: "t"}, {Namespace: "scheduler.workers", Name: "w1"}} {
		res, err := store.Get(ctx, protocol.GetRequest{Key: key})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		if d := res.Lease.ExpiresAt.Sub(res.Lease.RenewedAt); res.Lease.Owner != "w1" || d != scheduler.DefaultTTL {
			t.Errorf("%s: owner %s, ttl %v; want w1, %v", key, res.Lease.Owner, d, scheduler.DefaultTTL)
		}
	}
	stop()
	for _, key := range []protocol.Key{{Namespace: "scheduler", Name: "t"}, {Namespace: "scheduler.workers", Name: "w1"}} {
		if _, err := store.Get(ctx, protocol.GetRequest{Key: key}); !errors.Is(err, protocol.ErrNotFound) {
			t.Errorf("%s after shutdown: %v, want not_found", key, err)
		}
	}
	if err := s.Run(ctx); err == nil || !strings.Contains(err.Error(), "only once") {
		t.Errorf("a second Run: %v, want an error", err)
	}
}

// A renewal the store refuses loses the lease at once: the handler's
// context ends with a cause that says why, and the target is taken again
// with a new token.
func TestRefusedRenewalCancelsTheHandler(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	causes := make(chan error, 10)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	first := s.Snapshot().Owned[0].Token
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	if _, err := store.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	cause := <-causes
	if !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrNotFound) {
		t.Errorf("cause %v, want a lost lease (not_found)", cause)
	}
	eventually(t, "holds t again", func() (bool, string) {
		snap := s.Snapshot()
		return len(snap.Held()) == 1 && snap.Owned[0].Token > first, fmt.Sprintf("%+v", snap.Owned)
	})
}

// Targets that leave the set are given up (cause ErrRemoved) and released;
// new ones are taken; a failing targets function keeps the last set and is
// reported; invalid names are left out and reported.
func TestTargetsChange(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var mu sync.Mutex
	set, fail := []string{"a", "b", "c"}, error(nil)
	targets := func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return set, fail
	}
	causes := sync.Map{}
	s, err := scheduler.New(store, "w1", targets, func(ctx context.Context, target string, _ int64) {
		<-ctx.Done()
		causes.Store(target, context.Cause(ctx))
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds a b c", holds(s, "a", "b", "c"))

	mu.Lock()
	set = []string{"a", "c", "d", "d", "bad\x00name"}
	mu.Unlock()
	eventually(t, "holds a c d", holds(s, "a", "c", "d"))
	if c, _ := causes.Load("b"); !errors.Is(c.(error), scheduler.ErrRemoved) {
		t.Errorf("b's handler ended with %v, want ErrRemoved", c)
	}
	// The snapshot drops b when its handler has returned, just before its
	// release is sent (make test saw the store still hold it then).
	eventually(t, "b released after it left the set", func() (bool, string) {
		_, err := store.Get(context.Background(), protocol.GetRequest{Key: protocol.Key{Namespace: "scheduler", Name: "b"}})
		return errors.Is(err, protocol.ErrNotFound), fmt.Sprintf("get b: %v, want not_found", err)
	})
	eventually(t, "the invalid name is reported", func() (bool, string) {
		p := s.Snapshot().Problem
		return strings.Contains(p, "1 targets left out: not valid lease names"), p
	})

	mu.Lock()
	fail = errors.New("inventory down")
	set = nil
	mu.Unlock()
	eventually(t, "the failure is reported", func() (bool, string) {
		p := s.Snapshot().Problem
		return strings.Contains(p, "targets: inventory down"), p
	})
	if ok, why := holds(s, "a", "c", "d")(); !ok {
		t.Errorf("after a failed targets call: %s; want the last set kept", why)
	}
}

// A worker whose identity is held by another claims nothing until that
// lease ends, and says so.
func TestIdentityHeldElsewhere(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	other, err := store.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "scheduler.workers", Name: "w1"}, Owner: "w1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "the conflict is reported", func() (bool, string) {
		snap := s.Snapshot()
		return !snap.Member && strings.Contains(snap.Problem, "identity w1 is held by another worker"), snap.Problem
	})
	if n := len(s.Snapshot().Owned); n != 0 {
		t.Fatalf("claimed %d targets without membership", n)
	}
	if _, err := store.Release(ctx, protocol.ReleaseRequest{Key: other.Lease.Key, Owner: "w1", Token: other.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "joins and holds t", holds(s, "t"))
}

// busyStore hides the leases of one target from List, so that the
// scheduler tries to acquire it and meets a conflict, and counts those
// attempts.
type busyStore struct {
	protocol.Store
	target   string
	attempts atomic.Int64
}

func (b *busyStore) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	res, err := b.Store.List(ctx, req)
	var kept []protocol.Lease
	for _, l := range res.Leases {
		if l.Key.Name != b.target {
			kept = append(kept, l)
		}
	}
	res.Leases = kept
	return res, err
}

func (b *busyStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if req.Key.Name == b.target {
		b.attempts.Add(1)
	}
	return b.Store.Acquire(ctx, req)
}

// A busy target is backed off: over many rounds it is tried in far fewer
// of them, and each conflict is reported to the observer.
func TestBusyTargetBacksOff(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	if _, err := store.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "scheduler", Name: "busy"}, Owner: "someone", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	bs := &busyStore{Store: store, target: "busy"}
	var rounds, busy atomic.Int64
	obs := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		switch ev.Kind {
		case scheduler.EventRound:
			rounds.Add(1)
		case scheduler.EventBusy:
			if ev.Target == "busy" && errors.Is(ev.Cause, protocol.ErrConflict) {
				busy.Add(1)
			}
		}
	})
	// Rounds every 100ms; the backoff doubles from 100ms up to 3s, so that
	// rounds delayed on a loaded machine still leave most of them without
	// an attempt.
	s, err := scheduler.New(bs, "w1", scheduler.Static("busy", "free"), idle,
		&scheduler.Config{TTL: 300 * time.Millisecond, MaxBackoff: 3 * time.Second, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, s)
	eventually(t, "20 rounds", func() (bool, string) { return rounds.Load() >= 20, fmt.Sprint(rounds.Load()) })
	stop()
	n, r := bs.attempts.Load(), rounds.Load()
	t.Logf("%d attempts on the busy target in %d rounds", n, r)
	if n == 0 || n > r/2 {
		t.Errorf("%d attempts on the busy target in %d rounds: want at least one and at most half as many", n, r)
	}
	if busy.Load() != n {
		t.Errorf("%d busy events for %d conflicts", busy.Load(), n)
	}
}

// The observer sees acquisitions, losses, hand-overs (shutdown's
// included, as EventHandedOver's doc says) and releases with the counts
// after each.
func TestObserverEvents(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var mu sync.Mutex
	counts := map[scheduler.EventKind]int{}
	var last scheduler.Event
	var stopped []string // targets of hand-over events with cause ErrStopped
	obs := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		mu.Lock()
		defer mu.Unlock()
		counts[ev.Kind]++
		if ev.Kind == scheduler.EventRound {
			last = ev
		}
		if ev.Kind == scheduler.EventHandedOver && errors.Is(ev.Cause, scheduler.ErrStopped) && ev.Token > 0 {
			stopped = append(stopped, ev.Target)
		}
	})
	s, err := scheduler.New(store, "w1", scheduler.Static("a", "b", "c"), idle, &scheduler.Config{TTL: ttl, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, s)
	eventually(t, "a round with 3 owned", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return last.Owned == 3 && last.Share == 3 && last.Workers == 1 && last.Targets == 3 && last.Worker == "w1" && last.Namespace == "scheduler",
			fmt.Sprintf("%+v", last)
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if counts[scheduler.EventAcquired] != 3 || counts[scheduler.EventReleased] != 3 || counts[scheduler.EventLost] != 0 {
		t.Errorf("events %v, want 3 acquired, 3 released, none lost", counts)
	}
	slices.Sort(stopped)
	if fmt.Sprint(stopped) != "[a b c]" || counts[scheduler.EventHandedOver] != 3 {
		t.Errorf("hand-over events at shutdown for %v (%d in all), want one for each of a b c with cause ErrStopped",
			stopped, counts[scheduler.EventHandedOver])
	}
}

// lostAnswerStore takes the first acquire of one target into effect but
// answers timeout, as when the answer is lost on the way back: the outcome
// is unknown to the caller.
type lostAnswerStore struct {
	protocol.Store
	target string
	mu     sync.Mutex
	lost   *protocol.Result // the acquire whose answer was lost
	ids    []string         // request ids of the acquires of target
	renews int              // renewals of target
}

func (s *lostAnswerStore) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if req.Key.Name == s.target {
		s.mu.Lock()
		s.renews++
		s.mu.Unlock()
	}
	return s.Store.Renew(ctx, req)
}

func (s *lostAnswerStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if req.Key.Name != s.target {
		return s.Store.Acquire(ctx, req)
	}
	res, err := s.Store.Acquire(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, res.RequestID)
	if err == nil && s.lost == nil {
		s.lost = &res
		return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, RequestID: res.RequestID},
			backendkit.NewError(protocol.OpAcquire, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
	}
	return res, err
}

// An acquire whose outcome is unknown is retried with the same request
// id; the replay is confirmed with a renew, and the handler runs with the
// token the first acquire issued (no second lease is taken).
func TestUnknownAcquireIsRetriedWithItsRequestID(t *testing.T) {
	t.Parallel()
	store := &lostAnswerStore{Store: newStore(t), target: "t"}
	tokens := make(chan int64, 10)
	renewsBefore := make(chan int, 10)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, token int64) {
		store.mu.Lock()
		renewsBefore <- store.renews
		store.mu.Unlock()
		tokens <- token
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	token := <-tokens
	store.mu.Lock()
	first, ids := store.lost, append([]string(nil), store.ids...)
	store.mu.Unlock()
	if first == nil || token != first.Lease.Token {
		t.Fatalf("the handler got token %d; the acquire whose answer was lost issued %v", token, first)
	}
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Errorf("acquires of t with request ids %v; want the first one retried once with its id", ids)
	}
	if n := <-renewsBefore; n != 1 {
		t.Errorf("%d renewals of t before its handler started; want the one confirming the replayed acquire", n)
	}
}

// dropRenewStore takes the renewals of the membership lease into effect
// but, while drop is set, answers them timeout, as when the answers are
// lost on the way back: the lease stays live in the store while the worker
// cannot tell.
type dropRenewStore struct {
	protocol.Store
	drop atomic.Bool
}

func (s *dropRenewStore) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := s.Store.Renew(ctx, req)
	if err == nil && req.Key.Namespace == "scheduler"+scheduler.WorkersSuffix && s.drop.Load() {
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout},
			backendkit.NewError(protocol.OpRenew, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
	}
	return res, err
}

// A worker whose membership ran out by its clock while the lease is still
// live in the store (the renewals' answers were lost) renews that lease
// when it joins again: it keeps its token and never takes its own lease
// for another worker's.
func TestLapsedMembershipIsRenewed(t *testing.T) {
	t.Parallel()
	store := &dropRenewStore{Store: newStore(t)}
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "joins and holds t", holds(s, "t"))
	key := protocol.Key{Namespace: "scheduler" + scheduler.WorkersSuffix, Name: "w1"}
	get := func() protocol.Lease {
		t.Helper()
		res, err := store.Get(context.Background(), protocol.GetRequest{Key: key})
		if err != nil || res.Lease == nil {
			t.Fatalf("get %s: %v %v", key, res, err)
		}
		return *res.Lease
	}
	before := get()
	store.drop.Store(true)
	eventually(t, "the membership runs out by the worker's clock", func() (bool, string) {
		snap := s.Snapshot()
		return !snap.Member, snap.Problem
	})
	store.drop.Store(false)
	var problems []string
	eventually(t, "member again", func() (bool, string) {
		snap := s.Snapshot()
		if snap.Problem != "" {
			problems = append(problems, snap.Problem)
		}
		return snap.Member, snap.Problem
	})
	for _, p := range problems {
		if strings.Contains(p, "held by another worker") {
			t.Errorf("the worker took its own live membership lease for another's: %s", p)
		}
	}
	if after := get(); after.Token != before.Token || after.Owner != "w1" {
		t.Errorf("membership lease %s/%d after the lapse; want w1's lease renewed with token %d", after.Owner, after.Token, before.Token)
	}
}

// A dead worker's leases are taken as they run out, not at the next round:
// with rounds every 9s, a worker that sees another worker's membership and
// target leases (never renewed, 1.5s to live) claims its share, then the
// dead worker's target as soon as both leases expired.
func TestDeadWorkerTakenAtExpiry(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	const life = 1500 * time.Millisecond
	began := time.Now()
	for _, k := range []protocol.Key{{Namespace: "scheduler.workers", Name: "dead"}, {Namespace: "scheduler", Name: "a"}} {
		if _, err := store.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "dead", TTL: life}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scheduler.New(store, "w1", scheduler.Static("a", "b"), idle,
		&scheduler.Config{TTL: 20 * time.Second, RenewEvery: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "w1 claims its share, b", holds(s, "b"))
	if snap := s.Snapshot(); snap.Workers != 2 || snap.Share != 1 {
		t.Fatalf("w1 sees %d workers and a share of %d; want 2 and 1", snap.Workers, snap.Share)
	}
	eventually(t, "w1 takes the dead worker's a", holds(s, "a", "b"))
	took := time.Since(began)
	t.Logf("a taken %v after the dead worker's leases were taken for %v", took.Round(time.Millisecond), life)
	if limit := life + time.Second; took > limit {
		t.Errorf("a was taken %v after the dead worker's leases (%v to live) were taken: want within %v, long before the next round (9s)",
			took, life, limit)
	}
}

// Config.LockDelay is checked and carried by every target lease, not by
// the membership lease.
func TestLockDelayConfig(t *testing.T) {
	t.Parallel()
	if _, err := scheduler.New(protocol.New(memstore.New(nil), nil), "w1", scheduler.Static("a"),
		func(context.Context, string, int64) {}, &scheduler.Config{LockDelay: -time.Second}); err == nil {
		t.Fatal("a negative lock delay was accepted")
	}
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(context.Background())
	started := make(chan struct{}, 1)
	sched, err := scheduler.New(rt, "w1", scheduler.Static("a"), func(ctx context.Context, _ string, _ int64) {
		started <- struct{}{}
		<-ctx.Done()
	}, &scheduler.Config{Namespace: "ld", LockDelay: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-started
	res, err := rt.Get(context.Background(), protocol.GetRequest{Key: protocol.Key{Namespace: "ld", Name: "a"}})
	if err != nil || res.Lease.LockDelay != 7*time.Second {
		t.Fatalf("target lease: %+v %v, want lock-delay 7s", res.Lease, err)
	}
	res, err = rt.Get(context.Background(), protocol.GetRequest{Key: protocol.Key{Namespace: "ld" + scheduler.WorkersSuffix, Name: "w1"}})
	if err != nil || res.Lease.LockDelay != 0 {
		t.Fatalf("membership lease: %+v %v, want no lock-delay", res.Lease, err)
	}
}

// A membership lease ended by a revoke, in a workers' namespace that the
// store gives a lock-delay by default, is not another worker's: the worker
// says that the lock-delay keeps its identity, and joins again as the
// delay ends rather than at a later round.
func TestMembershipLockDelay(t *testing.T) {
	t.Parallel()
	// The worker takes the store's word on what keeps its identity: with
	// the store's clock 2s ahead, the revoked lease's end is in the
	// future by the worker's clock, yet no worker holds it (the old
	// scheduler judged by its own clock and said "held by another
	// worker").
	for _, skew := range []time.Duration{0, 2 * time.Second} {
		t.Run(fmt.Sprint("store clock ahead ", skew), func(t *testing.T) {
			t.Parallel()
			testMembershipLockDelay(t, skew)
		})
	}
}

func testMembershipLockDelay(t *testing.T, skew time.Duration) {
	const delay = 4 * time.Second
	backend := memstore.New(&memstore.Config{Now: func() time.Time { return time.Now().Add(skew) }})
	store := protocol.New(backend, &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{{Namespaces: "*", Delay: delay}}})
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	// Rounds every second: the first after the revoke finds the membership
	// gone; one that waited for a later round would join up to 1.1s after
	// the delay ended. With a skewed store, the worker's look at the end
	// of the delay comes skew late; a round joins first.
	const every = time.Second
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: 3 * time.Second, RenewEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	key := protocol.Key{Namespace: "scheduler" + scheduler.WorkersSuffix, Name: "w1"}
	sent := time.Now()
	if _, err := store.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	var problems []string
	eventually(t, "member again", func() (bool, string) {
		snap := s.Snapshot()
		if snap.Problem != "" && !slices.Contains(problems, snap.Problem) {
			problems = append(problems, snap.Problem)
		}
		res, err := store.Get(context.Background(), protocol.GetRequest{Key: key})
		return err == nil && res.Lease.Owner == "w1", fmt.Sprintf("%v; problems %q", err, problems)
	})
	joined := time.Since(sent)
	t.Logf("joined again %v after the revoke (lock-delay %v); problems %q", joined.Round(time.Millisecond), delay, problems)
	for _, p := range problems {
		if strings.Contains(p, "held by another worker") {
			t.Errorf("problem %q: no other worker holds the identity, a lock-delay keeps it", p)
		}
	}
	limit := delay + 500*time.Millisecond
	if skew > 0 {
		limit = delay + every*11/10 + 500*time.Millisecond
	}
	if joined > limit {
		t.Errorf("joined again %v after the revoke; want within %v (the lock-delay of %v ends, and the worker looks again then)",
			joined.Round(time.Millisecond), limit, delay)
	}
}

// A target kept by the lock-delay of its revoked lease is judged by the
// store's verdict, not the worker's clock: with the store's clock 2s
// ahead, the revoked lease's end is still in the future by the worker's
// clock, yet no worker holds the target. The worker must not count that
// as a conflict with a live holder (which doubles its next back-off); it
// waits for the delay's end. Judged by the local clock (the scheduler
// before the store's verdict), the claim logged "target busy".
func TestClaimTakesTheStoresLockDelayVerdict(t *testing.T) {
	t.Parallel()
	const delay, skew = 3 * time.Second, 2 * time.Second
	backend := memstore.New(&memstore.Config{Now: func() time.Time { return time.Now().Add(skew) }})
	store := protocol.New(backend, &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{{Namespaces: scheduler.DefaultNamespace, Delay: delay}}})
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	var logs syncbuf.Buffer
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: ttl,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	res, err := store.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "test", Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	revoked := res.Lease.Token
	eventually(t, "holds t again", func() (bool, string) {
		res, err := store.Get(context.Background(), protocol.GetRequest{Key: key})
		return err == nil && res.Lease.Owner == "w1" && res.Lease.Token > revoked, fmt.Sprint(err)
	})
	out := logs.String()
	if strings.Contains(out, "target busy") {
		t.Errorf("the claim took the lock-delay of the revoked lease for a live holder's conflict:\n%s", out)
	}
	if !strings.Contains(out, "target kept by a lock-delay") {
		t.Errorf("the claim never said a lock-delay kept t:\n%s", out)
	}
}

// firstAnswerLost takes the first acquire of a target into effect but
// answers timeout, as when the answer is lost on the way back.
type firstAnswerLost struct {
	protocol.Store
	mu   sync.Mutex
	lost *protocol.Lease // the lease whose acquire's answer was lost
}

func (s *firstAnswerLost) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := s.Store.Acquire(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.lost == nil && req.Key.Namespace == scheduler.DefaultNamespace {
		s.lost = res.Lease
		return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, RequestID: res.RequestID},
			backendkit.NewError(protocol.OpAcquire, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
	}
	return res, err
}

// An acquire whose outcome is unknown is retried before any other target
// is tried: the worker may hold that lease already, and a share filled
// with other targets would leave it unworked, blocking the target for
// another worker until it ran out.
func TestUnknownAcquireIsRetriedFirst(t *testing.T) {
	t.Parallel()
	const n = 50 // n targets, n workers: a share of 1
	rt := newStore(t)
	var targets []string
	for i := range n {
		targets = append(targets, fmt.Sprintf("t%02d", i))
		if i > 0 {
			if _, err := rt.Acquire(context.Background(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "scheduler" + scheduler.WorkersSuffix,
				Name: fmt.Sprintf("other%02d", i)}, Owner: "other", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
	}
	store := &firstAnswerLost{Store: rt}
	type started struct {
		target string
		token  int64
	}
	runs := make(chan started, n)
	s, err := scheduler.New(store, "w1", scheduler.Static(targets...), func(ctx context.Context, target string, token int64) {
		runs <- started{target, token}
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	var first started
	select {
	case first = <-runs:
	case <-time.After(waitFor):
		t.Fatal("no handler started")
	}
	store.mu.Lock()
	lost := store.lost
	store.mu.Unlock()
	if lost == nil || first.target != lost.Key.Name || first.token != lost.Token {
		t.Errorf("the first handler ran on %s with token %d; the acquire whose answer was lost took %v: want that one retried first",
			first.target, first.token, lost)
	}
}

// failFirstRelease answers the first release of a target unavailable
// without passing it on, as when the store cannot be reached for a moment.
type failFirstRelease struct {
	protocol.Store
	failed atomic.Bool
}

func (s *failFirstRelease) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	if req.Key.Namespace == scheduler.DefaultNamespace && s.failed.CompareAndSwap(false, true) {
		return protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusUnavailable},
			backendkit.NewError(protocol.OpRelease, protocol.StatusUnavailable, errors.New("connection refused"), "store down")
	}
	return s.Store.Release(ctx, req)
}

// A release of a given-up target that got no answer is tried again at
// the next round: left to run out, the lease would keep the target from
// every worker until its expiry and then, being ended other than by a
// release, for its lock-delay too.
func TestUnansweredReleaseIsRetried(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	store := &failFirstRelease{Store: rt}
	var mu sync.Mutex
	set := []string{"a", "b"}
	targets := func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return set, nil
	}
	s, err := scheduler.New(store, "w1", targets, idle, &scheduler.Config{TTL: ttl, LockDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds a b", holds(s, "a", "b"))
	mu.Lock()
	set = []string{"a"}
	mu.Unlock()
	removed := time.Now()
	eventually(t, "holds a", holds(s, "a"))
	// The round forgets b before it sends b's release (settle), so the
	// snapshot can show a alone a moment before the release is tried.
	eventually(t, "the release of b tried", func() (bool, string) { return store.failed.Load(), "no release of b yet" })
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "b"}
	// Another worker can take b once w1's lease on it is released: at the
	// round after the one that gave b up, within 2.2 renew intervals. The
	// lease itself would run out a TTL after its last renewal, which was
	// after b left the set, and its lock-delay (a minute) keep b after that.
	within := ttl
	for {
		res, err := rt.Acquire(context.Background(), protocol.AcquireRequest{Key: key, Owner: "other", TTL: time.Minute})
		if err == nil {
			t.Logf("b free %v after it left the set", time.Since(removed).Round(time.Millisecond))
			break
		}
		if time.Since(removed) > within {
			t.Fatalf("b still kept %v after it left the set (%v: %v): the unanswered release was not tried again",
				time.Since(removed).Round(time.Millisecond), res.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shutdownStore never answers the releases of target b (each waits until
// its context ends), and, once paused, no call at all, as a store that
// stops answering.
type shutdownStore struct {
	protocol.Store
	paused         atomic.Bool
	pausedRenewals atomic.Int64
	mu             sync.Mutex
	bSent          []time.Time     // when each release of b was sent
	bBudget        []time.Duration // and the time its context gave it
	bDone          []time.Time     // when each release of b returned
}

func (s *shutdownStore) wait(ctx context.Context, op protocol.Op) error {
	<-ctx.Done()
	return backendkit.NewError(op, protocol.StatusTimeout, ctx.Err(), "no answer")
}

func (s *shutdownStore) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	if req.Key.Namespace == scheduler.DefaultNamespace && req.Key.Name == "b" {
		dl, _ := ctx.Deadline()
		s.mu.Lock()
		s.bSent = append(s.bSent, time.Now())
		s.bBudget = append(s.bBudget, time.Until(dl))
		s.mu.Unlock()
		err := s.wait(ctx, protocol.OpRelease)
		s.mu.Lock()
		s.bDone = append(s.bDone, time.Now())
		s.mu.Unlock()
		return protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusTimeout}, err
	}
	if s.paused.Load() {
		return protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusTimeout}, s.wait(ctx, protocol.OpRelease)
	}
	return s.Store.Release(ctx, req)
}

func (s *shutdownStore) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if s.paused.Load() {
		s.pausedRenewals.Add(1)
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout}, s.wait(ctx, protocol.OpRenew)
	}
	return s.Store.Renew(ctx, req)
}

func (s *shutdownStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if s.paused.Load() {
		return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout}, s.wait(ctx, protocol.OpAcquire)
	}
	return s.Store.Acquire(ctx, req)
}

func (s *shutdownStore) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	if s.paused.Load() {
		return protocol.ListResult{Status: protocol.StatusTimeout}, s.wait(ctx, protocol.OpList)
	}
	return s.Store.List(ctx, req)
}

// A lease given up whose release got no answer is released once more at
// shutdown, with the other leases (not after them) and within OpTimeout,
// whether the shutdown comes between rounds or cuts a round short; a
// round cut short does not wait for that release first.
func TestUnansweredReleaseIsRetriedAtShutdown(t *testing.T) {
	t.Parallel()
	const opTimeout = time.Second
	for _, c := range []struct {
		name   string
		during bool // stop while a round's renewals wait
	}{{"between rounds", false}, {"during a round", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			store := &shutdownStore{Store: newStore(t)}
			var mu sync.Mutex
			set := []string{"a", "b"}
			var stopped time.Time // when a's handler saw its context end
			targets := func(context.Context) ([]string, error) {
				mu.Lock()
				defer mu.Unlock()
				return set, nil
			}
			handler := func(ctx context.Context, target string, _ int64) {
				<-ctx.Done()
				if target == "a" && errors.Is(context.Cause(ctx), scheduler.ErrStopped) {
					mu.Lock()
					stopped = time.Now()
					mu.Unlock()
				}
			}
			s, err := scheduler.New(store, "w1", targets, handler,
				&scheduler.Config{TTL: 10 * time.Second, RenewEvery: 2 * time.Second, OpTimeout: opTimeout})
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, s)
			eventually(t, "holds a b", holds(s, "a", "b"))
			mu.Lock()
			set = []string{"a"}
			mu.Unlock()
			eventually(t, "the release of b went unanswered", func() (bool, string) {
				store.mu.Lock()
				defer store.mu.Unlock()
				return len(store.bDone) == 1, fmt.Sprintf("%d releases of b returned", len(store.bDone))
			})
			store.paused.Store(true)
			if c.during {
				eventually(t, "a round's renewals wait", func() (bool, string) {
					return store.pausedRenewals.Load() > 0, "no renewal waits"
				})
			}
			began := time.Now()
			stop()
			t.Logf("Run returned %v after its context ended (OpTimeout %v)", time.Since(began).Round(time.Millisecond), opTimeout)
			store.mu.Lock()
			sent, budget, returned := store.bSent, store.bBudget, store.bDone
			store.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			if len(sent) != 2 {
				t.Fatalf("%d releases of b sent; want 2: the one without an answer and one at shutdown", len(sent))
			}
			// A round cut short that tried b's release first waited for
			// its answer (OpTimeout) before the shutdown stopped a.
			if stopped.IsZero() || len(returned) < 2 || returned[1].Before(stopped) {
				t.Errorf("b's release sent again returned before a's handler was stopped (at %v): the round cut short waited for it",
					stopped)
			}
			if budget[1] > opTimeout {
				t.Errorf("b's release at shutdown was given %v; want at most OpTimeout %v", budget[1], opTimeout)
			}
		})
	}
}

// loseAnswerAndJoin answers timeout to the first acquire of target b, which
// it takes into effect, and right then has a second worker join: the
// share drops to the one target w1 already holds.
type loseAnswerAndJoin struct {
	protocol.Store
	mu   sync.Mutex
	lost *protocol.Lease
}

func (s *loseAnswerAndJoin) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := s.Store.Acquire(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.lost == nil && req.Key.Namespace == scheduler.DefaultNamespace && req.Key.Name == "b" {
		s.lost = res.Lease
		if _, err := s.Store.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: scheduler.DefaultNamespace + scheduler.WorkersSuffix,
			Name: "w2"}, Owner: "w2", TTL: time.Minute}); err != nil {
			return res, err
		}
		return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, RequestID: res.RequestID},
			backendkit.NewError(protocol.OpAcquire, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
	}
	return res, err
}

// An acquire whose outcome is unknown is resolved even when the worker
// holds its share by then (a worker joined): the lease it may hold is
// worked or released at the next round, not left unworked until it runs
// out and then kept from every worker by its lock-delay.
func TestUnknownAcquireIsResolvedAtFullShare(t *testing.T) {
	t.Parallel()
	const lttl = 6 * time.Second
	store := &loseAnswerAndJoin{Store: newStore(t)}
	var mu sync.Mutex
	set := []string{"a"}
	targets := func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return set, nil
	}
	var worked atomic.Int64 // the token of b's handler
	s, err := scheduler.New(store, "w1", targets, func(ctx context.Context, target string, token int64) {
		if target == "b" {
			worked.Store(token)
		}
		<-ctx.Done()
	}, &scheduler.Config{TTL: lttl, LockDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds a", holds(s, "a"))
	mu.Lock()
	set = []string{"a", "b"}
	mu.Unlock()
	eventually(t, "the answer to b's acquire is lost", func() (bool, string) {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.lost != nil, "not yet"
	})
	store.mu.Lock()
	lost := *store.lost
	store.mu.Unlock()
	// The next round comes within 1.1 renew intervals (2.2s); the lease
	// runs out at 6s.
	limit := lost.ExpiresAt.Add(-lttl / 4)
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "b"}
	for {
		if worked.Load() == lost.Token {
			t.Logf("b worked by w1 with the lost acquire's token %d", lost.Token)
			return
		}
		res, err := store.Get(context.Background(), protocol.GetRequest{Key: key})
		if err != nil && protocol.StatusOf(err) != protocol.StatusNotFound {
			t.Fatalf("get b: %v", err)
		}
		if res.Lease == nil || res.Lease.Token != lost.Token {
			t.Logf("b's lease (token %d) released %v before it would run out", lost.Token, time.Until(lost.ExpiresAt).Round(time.Millisecond))
			return
		}
		if time.Now().After(limit) {
			t.Fatalf("b's lease (token %d), whose acquire's answer was lost, neither worked nor released %v before it runs out",
				lost.Token, time.Until(lost.ExpiresAt).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
