package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
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

// lossyStore records when each acquire was sent; acquires of the keys in
// silent take effect in the store (or replay, or are refused) but their
// answers are lost on the way back, so the worker cannot tell whether it holds the key;
// releases of the keys in deaf get no answer (and do nothing).
type lossyStore struct {
	protocol.Store
	mu     sync.Mutex
	silent map[protocol.Key]bool
	deaf   map[protocol.Key]bool
	sent   map[protocol.Key][]time.Time
	taken  map[protocol.Key]protocol.Lease // by the first silent acquire
	// hang (hangRelease) holds the next acquire (release) of a key until
	// its context ends, once per key set; hung records when such a call
	// returned.
	hang        map[protocol.Key]bool
	hangRelease map[protocol.Key]bool
	hanging     atomic.Int64
	hung        []time.Time
	// before runs once, before the next acquire of a key goes on.
	before map[protocol.Key]func()
}

func newLossyStore(t *testing.T) *lossyStore {
	return &lossyStore{Store: newStore(t), silent: map[protocol.Key]bool{}, deaf: map[protocol.Key]bool{},
		sent: map[protocol.Key][]time.Time{}, taken: map[protocol.Key]protocol.Lease{},
		hang: map[protocol.Key]bool{}, hangRelease: map[protocol.Key]bool{}, before: map[protocol.Key]func(){}}
}

// member is the membership key of worker w1.
var member = protocol.Key{Namespace: scheduler.DefaultNamespace + scheduler.WorkersSuffix, Name: "w1"}

// target is the key of the scheduler's target name.
func target(name string) protocol.Key {
	return protocol.Key{Namespace: scheduler.DefaultNamespace, Name: name}
}

// targets is the keys of the scheduler's target names.
func targets(names ...string) []protocol.Key {
	keys := make([]protocol.Key, len(names))
	for i, n := range names {
		keys[i] = target(n)
	}
	return keys
}

func (s *lossyStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	s.mu.Lock()
	before := s.before[req.Key]
	delete(s.before, req.Key)
	s.mu.Unlock()
	if before != nil {
		before() // before the acquire is recorded as sent
	}
	s.mu.Lock()
	s.sent[req.Key] = append(s.sent[req.Key], time.Now())
	silent := s.silent[req.Key]
	s.mu.Unlock()
	if s.hangIf(ctx, s.hang, req.Key) {
		return s.Store.Acquire(ctx, req) // as the store answers a context that ended
	}
	res, err := s.Store.Acquire(ctx, req)
	if !silent || (err != nil && protocol.StatusOf(err) != protocol.StatusConflict) {
		return res, err // only a judged answer (taken or refused) is lost
	}
	s.mu.Lock()
	if _, ok := s.taken[req.Key]; !ok && err == nil && res.Lease != nil {
		s.taken[req.Key] = *res.Lease
	}
	s.mu.Unlock()
	return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, RequestID: res.RequestID},
		backendkit.NewError(protocol.OpAcquire, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
}

func (s *lossyStore) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	s.mu.Lock()
	deaf := s.deaf[req.Key]
	s.mu.Unlock()
	if s.hangIf(ctx, s.hangRelease, req.Key) {
		return s.Store.Release(ctx, req) // as the store answers a context that ended
	}
	if deaf {
		return protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusTimeout, RequestID: req.RequestID},
			backendkit.NewError(protocol.OpRelease, protocol.StatusTimeout, context.DeadlineExceeded, "no answer")
	}
	return s.Store.Release(ctx, req)
}

// hangIf waits for ctx to end, and reports true, when m holds key (and
// takes it out).
func (s *lossyStore) hangIf(ctx context.Context, m map[protocol.Key]bool, key protocol.Key) bool {
	s.mu.Lock()
	hang := m[key]
	m[key] = false
	s.mu.Unlock()
	if !hang {
		return false
	}
	s.hanging.Add(1)
	<-ctx.Done()
	s.mu.Lock()
	s.hung = append(s.hung, time.Now())
	s.mu.Unlock()
	return true
}

// beforeNext has f run once, before the next acquire of key goes on.
func (s *lossyStore) beforeNext(key protocol.Key, f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before[key] = f
}

// set turns silent, deaf or a hang (m) on or off for keys.
func (s *lossyStore) set(m map[protocol.Key]bool, on bool, keys ...protocol.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		m[k] = on
	}
}

// lostLease returns the lease the first silent acquire of key took.
func (s *lossyStore) lostLease(key protocol.Key) (protocol.Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.taken[key]
	return l, ok
}

// acquiresSince counts the acquires of keys sent at or after t.
func (s *lossyStore) acquiresSince(t time.Time, keys ...protocol.Key) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range keys {
		for _, at := range s.sent[k] {
			if !at.Before(t) {
				n++
			}
		}
	}
	return n
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
	for c, key := range map[string]protocol.Key{"stopped": target("t"), "removed": target("t"), "join stopped": member} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			store := newLossyStore(t)
			store.set(store.silent, true, key)
			answer := func() { store.set(store.silent, false, key) }
			// From the round that sees t gone, answers come back; every
			// retry before it was silent.
			var removed atomic.Bool
			set := tLeaves(&removed, answer)
			// Stopped: answers come back when the shutdown begins, before
			// its resend.
			logger := slog.New(onMessage(slog.NewTextHandler(io.Discard, nil), "scheduler: stopping", func(slog.Record) { answer() }))
			s, err := scheduler.New(store, "w1", set, idle, &scheduler.Config{TTL: ttl, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, s)
			var taken protocol.Lease
			eventually(t, "an acquire of "+key.String()+" takes the lease and loses its answer", func() (ok bool, _ string) {
				taken, ok = store.lostLease(key)
				return ok, "no acquire yet"
			})
			if c != "removed" {
				stop()
			} else {
				removed.Store(true)
			}
			// The lease must be gone by a get sent before it would have
			// run out.
			for {
				sent := time.Now()
				res, err := store.Store.Get(context.Background(), protocol.GetRequest{Key: key})
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

// tLeaves is the targets t and u until removed is set, then u alone;
// gone, when not nil, runs each time the set without t is returned.
func tLeaves(removed *atomic.Bool, gone func()) scheduler.Targets {
	return func(context.Context) ([]string, error) {
		if !removed.Load() {
			return []string{"t", "u"}, nil
		}
		if gone != nil {
			gone()
		}
		return []string{"u"}, nil
	}
}

// run runs s until the test ends or stop is called; stop cancels Run's
// context and waits for it to return (fatal after waitFor).
func run(t *testing.T, s *scheduler.Scheduler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Fatal("Run did not return")
		}
	}
}

// An acquire whose answer was lost is resent for a target no longer
// wanted only while a lease it took may still be live (TTL after the
// target left): after that a resend learns nothing worth knowing. The old
// scheduler resent it every round for ever.
func TestLostAcquireOfAnUnwantedTargetIsResentOnlyWhileItsLeaseMayLive(t *testing.T) {
	t.Parallel()
	store := newLossyStore(t)
	store.set(store.silent, true, target("t")) // for good: no resend ever learns the outcome
	var removed atomic.Bool
	s, err := scheduler.New(store, "w1", tLeaves(&removed, nil), idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, "an acquire of t takes the lease and loses its answer", func() (bool, string) {
		_, ok := store.lostLease(target("t"))
		return ok, "no acquire of t yet"
	})
	r := time.Now()
	removed.Store(true)
	every := ttl / 3
	// The round that sees t gone comes within 1.1 × every; it resends
	// until TTL after that. A round later, nothing may be sent.
	quiet := r.Add(ttl + 2*every)
	time.Sleep(time.Until(quiet.Add(2 * every)))
	if n := store.acquiresSince(quiet, target("t")); n > 0 {
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
	store.set(store.silent, true, targets(lost...)...)
	wanted := func(context.Context) ([]string, error) {
		set := []string{"u"}
		for _, n := range lost {
			if _, ok := store.lostLease(target(n)); !ok {
				set = append(set, n)
			}
		}
		return set, nil
	}
	s, err := scheduler.New(store, "w1", wanted, idle, &scheduler.Config{TTL: 6 * time.Second, RenewEvery: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, s)
	eventually(t, "every acquire of t1..t5 takes its lease and loses its answer", func() (bool, string) {
		for _, n := range lost {
			if _, ok := store.lostLease(target(n)); !ok {
				return false, n + " not acquired yet"
			}
		}
		return true, ""
	})
	stopped := time.Now()
	stop()
	// One resend by the shutdown, and one by a round under way when ctx
	// ended (cut short).
	if n := store.acquiresSince(stopped, targets(lost...)...); n > 2 {
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
	store.set(store.silent, true, target("t"))
	store.set(store.deaf, true, target("t"))
	var logs syncbuf.Buffer
	// The shutdown's resend is answered: answers come back from the
	// moment it begins, before any resend of it.
	logger := slog.New(onMessage(slog.NewTextHandler(&logs, nil), "scheduler: stopping", func(slog.Record) {
		store.set(store.silent, false, target("t"))
	}))
	s, err := scheduler.New(store, "w1", scheduler.Static("t", "u"), idle, &scheduler.Config{TTL: ttl, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, s)
	var taken protocol.Lease
	eventually(t, "an acquire of t takes the lease and loses its answer", func() (ok bool, _ string) {
		taken, ok = store.lostLease(target("t"))
		return ok, "no acquire of t yet"
	})
	stop()
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
	stop := run(t, s)
	eventually(t, "joins and holds t", holds(s, "t"))
	store.drop.Store(true) // for good: the renewals (and the lapsed renew) take effect, unanswered
	eventually(t, "the membership runs out by the worker's clock", func() (bool, string) {
		snap := s.Snapshot()
		return !snap.Member, snap.Problem
	})
	res, err := store.Get(context.Background(), protocol.GetRequest{Key: member})
	if err != nil {
		t.Fatalf("the lapsed membership is not live in the store before the stop: %v", err)
	}
	live := res.Lease.ExpiresAt // at least until then, unless released
	stop()
	sent := time.Now()
	res, err = store.Get(context.Background(), protocol.GetRequest{Key: member})
	if !sent.Before(live) {
		t.Skipf("inconclusive: the get after the stop was sent at %s, not before the lease would have run out (%s)", sent, live)
	}
	if res.Status != protocol.StatusNotFound {
		t.Errorf("after the stop, the lapsed membership lease is %s (%v): want it released", res.Status, err)
	}
}

// logLine returns the first line of logs that holds every part, or "".
func logLine(logs string, parts ...string) string {
	for line := range strings.Lines(logs) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return ""
}

// onMessage wraps h to call f with the first record whose message starts
// with prefix, before it is written: a test learns at once, in the
// logger's goroutine, that the scheduler reached a step.
func onMessage(h slog.Handler, prefix string, f func(slog.Record)) slog.Handler {
	return &messageHook{Handler: h, prefix: prefix, once: &sync.Once{}, f: f}
}

type messageHook struct {
	slog.Handler
	prefix string
	once   *sync.Once
	f      func(slog.Record)
}

func (h *messageHook) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.once.Do(func() { h.f(r) })
	}
	return h.Handler.Handle(ctx, r)
}

func (h *messageHook) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.Handler = h.Handler.WithAttrs(attrs)
	return &c
}

func (h *messageHook) WithGroup(name string) slog.Handler {
	c := *h
	c.Handler = h.Handler.WithGroup(name)
	return &c
}

// An acquire whose answer was lost and that was refused (the key held by
// another) is not recorded, so a resend runs again: once the other lets
// go, a resend takes the key anew, and that lease lives TTL after the
// resend, past the point where the worker stops resending, when the
// resend's answer is lost too or when the release of what it took gets no
// answer. The worker must not then say that any lease its acquires took
// has run out: it warns, naming when the lease runs out. The old
// scheduler logged, at info, "any lease it took has run out" (and, after
// the first fix, still did so when only the release went unanswered).
func TestStoppedResendNamesWhenAResendsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"resend unanswered", "release unanswered"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			testStoppedResendNamesWhenAResendsLeaseRunsOut(t, c == "release unanswered")
		})
	}
}

func testStoppedResendNamesWhenAResendsLeaseRunsOut(t *testing.T, releaseUnanswered bool) {
	store := newLossyStore(t)
	store.set(store.silent, true, target("t"))
	// Another worker takes t just before w1's first acquire reaches the
	// store (t was free when w1 listed the holders).
	var (
		other    protocol.Result
		otherErr error
	)
	store.beforeNext(target("t"), func() {
		other, otherErr = store.Store.Acquire(context.Background(), protocol.AcquireRequest{Key: target("t"), Owner: "other", TTL: time.Minute})
	})
	var removed, seen atomic.Bool
	wanted := tLeaves(&removed, func() { seen.Store(true) })
	type drop struct {
		level    slog.Level
		runsOut  time.Time
		live     *protocol.Lease // w1's lease on t in the store at the drop
		liveRead error
	}
	dropped := make(chan drop, 1)
	held := func() (*protocol.Lease, error) {
		res, err := store.Store.Get(context.Background(), protocol.GetRequest{Key: target("t")})
		if err == nil && res.Lease.Owner == "w1" {
			return res.Lease, nil
		}
		if protocol.StatusOf(err) == protocol.StatusNotFound {
			err = nil
		}
		return nil, err
	}
	logger := slog.New(onMessage(slog.NewTextHandler(io.Discard, nil), "scheduler: stopped resending", func(r slog.Record) {
		d := drop{level: r.Level}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "runs_out" {
				d.runsOut, _ = a.Value.Any().(time.Time)
			}
			return true
		})
		d.live, d.liveRead = held()
		dropped <- d
	}))
	const lttl, every = 6 * time.Second, 500 * time.Millisecond
	s, err := scheduler.New(store, "w1", wanted, idle, &scheduler.Config{TTL: lttl, RenewEvery: every, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, "an acquire of t is sent and its refusal lost", func() (bool, string) {
		return store.acquiresSince(time.Time{}, target("t")) > 0, "no acquire of t yet"
	})
	// The acquire is recorded as sent (acquiresSince) after the hook ran,
	// under the store's lock: other and otherErr are read after it.
	if otherErr != nil {
		t.Fatalf("the other worker's acquire of t: %v", otherErr)
	}
	removed.Store(true)
	eventually(t, "a round sees t gone", func() (bool, string) { return seen.Load(), "not yet" })
	// The other lets go a while after: the lease a resend then takes
	// outlives the worker's resending by seconds.
	time.Sleep(4 * every)
	if releaseUnanswered {
		store.set(store.deaf, true, target("t"))
	}
	if _, err := store.Store.Release(context.Background(), protocol.ReleaseRequest{Key: target("t"), Owner: "other", Token: other.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	if releaseUnanswered {
		// After the release: a resend before it, answered conflict, would
		// end the orphan as refused.
		store.set(store.silent, false, target("t"))
	}
	var taken *protocol.Lease
	eventually(t, "a resend takes t anew", func() (bool, string) {
		var err error
		taken, err = held()
		return taken != nil, fmt.Sprint(err)
	})
	var d drop
	select {
	case d = <-dropped:
	case <-time.After(lttl + waitFor):
		t.Fatal("the worker never stopped resending the acquire of t")
	}
	if d.liveRead != nil {
		t.Fatalf("get t at the drop: %v", d.liveRead)
	}
	if d.live == nil {
		t.Skipf("inconclusive: the lease the resend took (token %d, until %s) had run out when the worker stopped resending", taken.Token, taken.ExpiresAt)
	}
	if d.level < slog.LevelWarn || d.runsOut.Before(d.live.ExpiresAt) {
		t.Errorf("the worker stopped resending while w1's lease on t (token %d) lives until %s, logged at %s with runs_out %v: want a warning naming when it runs out",
			d.live.Token, d.live.ExpiresAt, d.level, d.runsOut)
	}
}

// A resend that the store does not carry out (the runtime closed) learns
// nothing: the lease the lost acquire may have taken is warned about at
// shutdown, not dropped as if refused, whether the store closed just
// before the stop or between a round's list and its claim (whose resend
// of the lost acquire answered closed, which stops the worker by
// itself). The old scheduler took "closed" for a refusal and said
// nothing.
func TestOrphanResentToAClosedStoreIsWarnedAbout(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"at the stop", "before a claim"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			store := newLossyStore(t)
			store.set(store.silent, true, target("t"))
			var logs syncbuf.Buffer
			s, err := scheduler.New(store, "w1", scheduler.Static("t", "u"), idle,
				&scheduler.Config{TTL: ttl, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, s)
			eventually(t, "an acquire of t takes the lease and loses its answer", func() (ok bool, _ string) {
				_, ok = store.lostLease(target("t"))
				return ok, "no acquire of t yet"
			})
			if c == "at the stop" {
				if err := store.Store.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				// The next acquire of t (a round's claim retrying it, its
				// list answered) meets a closed store, and the worker
				// stops at that answer (TestAClosedStoreStopsTheWorker).
				var closed atomic.Bool
				store.beforeNext(target("t"), func() {
					_ = store.Store.Close(context.Background())
					closed.Store(true)
				})
				eventually(t, "a claim's resend of t meets the closed store", func() (bool, string) {
					return closed.Load(), "not yet"
				})
			}
			stop()
			if logLine(logs.String(), "level=WARN", "key=scheduler/t ", "closed") != "" {
				return
			}
			t.Errorf("the shutdown's logs do not warn that the lease the lost acquire of t may have taken was not released (the store closed):\n%s", logs.String())
		})
	}
}

// One lost acquire whose resends never get an answer does not hold up
// the others: a round resends the least recently unanswered first, so
// within two rounds of the store answering again every other is
// resolved. The old scheduler went in map order, at random, and stopped
// at the silent one wherever it fell, round after round.
func TestASilentLostAcquireDoesNotHoldUpTheOthers(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"}
	silent, others := names[0], names[1:]
	store := newLossyStore(t)
	store.set(store.silent, true, targets(names...)...)
	var rounds, switched atomic.Int64
	wanted := func(context.Context) ([]string, error) {
		n := rounds.Add(1)
		set := []string{"u"}
		lost := 0
		for _, name := range names {
			if _, ok := store.lostLease(target(name)); ok {
				lost++
			} else {
				set = append(set, name) // wanted until its acquire is lost
			}
		}
		if lost == len(names) && switched.Load() == 0 {
			store.set(store.silent, false, targets(others...)...) // the store answers again, but for one key
			switched.Store(n)
		}
		return set, nil
	}
	s, err := scheduler.New(store, "w1", wanted, idle, &scheduler.Config{TTL: 30 * time.Second, RenewEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, "every acquire is lost and the store answers again", func() (bool, string) {
		return switched.Load() > 0, fmt.Sprintf("%d rounds", rounds.Load())
	})
	// Rounds R+1 and R+2 resolve lost acquires before they ask for the
	// targets.
	eventually(t, "two more rounds", func() (bool, string) {
		return rounds.Load() >= switched.Load()+2, fmt.Sprintf("%d rounds", rounds.Load())
	})
	var kept []string
	for _, name := range others {
		res, err := store.Store.Get(context.Background(), protocol.GetRequest{Key: target(name)})
		if err == nil {
			kept = append(kept, fmt.Sprintf("%s (token %d)", name, res.Lease.Token))
		} else if protocol.StatusOf(err) != protocol.StatusNotFound {
			t.Fatalf("get %s: %v", name, err)
		}
	}
	if len(kept) > 0 {
		t.Errorf("two rounds after the store answered again (but for %s), the leases lost acquires took of %v are still held: want every one released", silent, kept)
	}
}

// Every store call of a round (a resend of a lost acquire, the join, a
// claim's acquire, a release) is cut short when Run's context ends (the
// shutdown sends again what needs sending), so a store that does not
// answer holds up the stop by the shutdown's own steps only. The old
// scheduler let each take its whole OpTimeout first.
func TestARoundsCallsAreCutShortByTheStop(t *testing.T) {
	t.Parallel()
	const opTimeout = 5 * time.Second
	for _, c := range []string{"resend", "join", "claim", "release"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			store := newLossyStore(t)
			var removed, seen atomic.Bool
			wanted := tLeaves(&removed, func() {
				if !seen.Swap(true) && c == "resend" {
					// t's lost acquire is now an orphan: the next round's
					// resend is the next acquire of t.
					store.set(store.hang, true, target("t"))
				}
			})
			switch c {
			case "join":
				store.set(store.hang, true, member) // the first round's join
			case "claim":
				store.set(store.hang, true, target("t")) // the first acquire of t
			case "resend":
				store.set(store.silent, true, target("t"))
			}
			var logs syncbuf.Buffer
			s, err := scheduler.New(store, "w1", wanted, idle, &scheduler.Config{TTL: 10 * time.Second, RenewEvery: time.Second,
				OpTimeout: opTimeout, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, s)
			switch c {
			case "resend":
				eventually(t, "an acquire of t takes the lease and loses its answer", func() (ok bool, _ string) {
					_, ok = store.lostLease(target("t"))
					return ok, "no acquire of t yet"
				})
				removed.Store(true)
			case "release":
				eventually(t, "holds t and u", holds(s, "t", "u"))
				store.set(store.hangRelease, true, target("t")) // the release of t once it leaves the set
				removed.Store(true)
			}
			eventually(t, "a round's "+c+" waits for an answer", func() (bool, string) {
				return store.hanging.Load() > 0, "none waits"
			})
			stopped := time.Now()
			stop()
			store.mu.Lock()
			hung := store.hung
			store.mu.Unlock()
			if len(hung) == 0 {
				t.Fatal("the waiting call never returned")
			}
			if took := hung[0].Sub(stopped); took > opTimeout/2 {
				t.Errorf("the round's %s returned %v after Run's context ended: want it cut short (OpTimeout %v)", c, took.Round(time.Millisecond), opTimeout)
			}
			if c != "release" {
				return
			}
			// The shutdown sent it again, and no warning said the store
			// had not answered: the stop cut the call short.
			res, err := store.Store.Get(context.Background(), protocol.GetRequest{Key: target("t")})
			if res.Status != protocol.StatusNotFound {
				t.Errorf("after the stop, t's lease is %s (%v): want it released by the shutdown", res.Status, err)
			}
			if line := logLine(logs.String(), "level=WARN", "target=t "); line != "" {
				t.Errorf("a warning about t when only the stop cut its release short: %s", line)
			}
		})
	}
}

// A release that never gets an answer is tried each round until the lease
// has run out by the worker's clock; then the worker says that it stopped
// trying. The old scheduler dropped it without a word, after a warning
// that promised another try.
func TestUnansweredReleaseIsGivenUpAloud(t *testing.T) {
	t.Parallel()
	store := newLossyStore(t)
	var removed atomic.Bool
	var logs syncbuf.Buffer
	s, err := scheduler.New(store, "w1", tLeaves(&removed, nil), idle, &scheduler.Config{TTL: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, "holds t and u", holds(s, "t", "u"))
	store.set(store.deaf, true, target("t"))
	removed.Store(true)
	eventually(t, "the worker says it stopped trying to release t", func() (bool, string) {
		return logLine(logs.String(), "stopped trying", "target=t ") != "", logs.String()
	})
}
