package schedulertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// Timing of every case: short TTLs so that a case takes seconds.
const (
	ttl        = 2 * time.Second
	renewEvery = ttl / 3
	// converge bounds the waits for a fleet to settle. It is generous: the
	// machine may be loaded, and only a fleet that never settles should fail.
	converge = 40 * ttl
	// opTimeout bounds the suite's own store calls.
	opTimeout = 30 * time.Second
	// pace is the pause between two writes of a writing handler, so that
	// handlers do not monopolise a single-writer store.
	pace = 50 * time.Millisecond
	// wakeMargin is what the takeover case allows between a dead worker's
	// leases running out and a survivor taking the first of its targets:
	// the survivors look again at that expiry, so it covers a timer, two
	// lists and an acquire on a loaded machine. Survivors that waited for
	// their next round instead would come up to 1.1 renew intervals late.
	wakeMargin = renewEvery / 3
	// takeoverMargin is what the takeover case allows beyond the promised
	// TTL + one renew interval for the last of the dead worker's targets:
	// timers, and the claim's store calls on a loaded machine.
	takeoverMargin = renewEvery / 4
	// lateCall is how late a bare timer of the test process may wake up,
	// and how long a survivor's list may take, during the
	// takeover for its bounds to be checked: a take waits for about four of
	// them (the timer at expiry, two lists, an acquire), so one late by a
	// quarter of wakeMargin says the machine is too loaded. On a quiet
	// machine timers wake up under a millisecond late and calls take a few.
	lateCall = wakeMargin / 4
)

// fleet is one case's workers, their handler runs and an admin handle.
type fleet struct {
	t        *testing.T
	h        Harness
	ns       string
	targets  []string
	admin    protocol.Store
	write    bool // handlers write to the resource until their context ends
	gate     chan struct{}
	gateOnce sync.Once
	noReturn bool // handlers wait for gate after their context ended
	// zombies names workers whose handlers go on writing after their
	// context ended, until zombieGate is closed, as a process stalled in
	// the middle of its work would when it wakes up.
	zombies    map[string]bool
	zombieGate chan struct{}

	mu       sync.Mutex
	runs     []*run
	byLease  map[leaseID]*run
	revoked  map[leaseID]bool   // leases the case revoked
	workers  map[string]*worker // by name
	running  map[string]*run    // by target
	overlaps []overlap
	problems []string
	refused  int
	// refusedBy counts the resource's refusals by run: only a run whose
	// lease was lost or handed over may be refused.
	refusedBy map[*run]int
	// zombieWrites counts the writes of handlers whose context had ended:
	// accepted and refused.
	zombieAccepted, zombieRefused int
}

// overlap is a handler run started while another of the same target ran.
type overlap struct{ earlier, later *run }

type leaseID struct {
	target string
	token  int64
}

// run is one call of a handler.
type run struct {
	worker  string
	target  string
	token   int64
	started time.Time     // when the handler was called
	seen    chan struct{} // closed when the handler saw its context end
	ended   chan struct{} // closed when the handler returned
	cause   error         // set before seen is closed
}

type worker struct {
	name   string
	fault  *faultStore
	sched  *scheduler.Scheduler
	cancel context.CancelFunc
	done   chan error
	rounds chan struct{} // signalled (without blocking) when a round ends
}

func newFleet(t *testing.T, newHarness Factory, targets int) *fleet {
	h := newHarness(t)
	f := &fleet{t: t, h: h, ns: "sched", admin: h.NewStore(t), gate: make(chan struct{}),
		zombies: map[string]bool{}, zombieGate: make(chan struct{}),
		byLease: map[leaseID]*run{}, running: map[string]*run{}, revoked: map[leaseID]bool{}, workers: map[string]*worker{},
		refusedBy: map[*run]int{}}
	t.Cleanup(func() { _ = f.admin.Close(context.Background()) })
	for i := range targets {
		f.targets = append(f.targets, fmt.Sprintf("10.0.%d.0/24", i))
	}
	return f
}

// start starts a worker; it is stopped (and its store closed) when the
// case ends, unless stopped before.
func (f *fleet) start(name string) *worker {
	f.t.Helper()
	store := f.h.NewStore(f.t)
	w := &worker{name: name, fault: &faultStore{Store: store}, done: make(chan error, 1), rounds: make(chan struct{}, 1)}
	logger := slog.New(slog.NewTextHandler(testWriter{f.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	observer := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		if ev.Kind == scheduler.EventRound {
			select {
			case w.rounds <- struct{}{}:
			default:
			}
		}
	})
	sched, err := scheduler.New(w.fault, name, scheduler.Static(f.targets...), f.handler(name),
		&scheduler.Config{Namespace: f.ns, TTL: ttl, Logger: logger, Observer: observer})
	if err != nil {
		f.t.Fatalf("scheduler.New: %v", err)
	}
	w.sched = sched
	f.mu.Lock()
	f.workers[name] = w
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- sched.Run(ctx) }()
	f.t.Cleanup(func() {
		f.openGate() // a case that failed early may have left handlers waiting
		f.stop(w)
		_ = store.Close(context.Background())
	})
	return w
}

// stop shuts a worker down and waits for Run to return.
func (f *fleet) stop(w *worker) {
	f.t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if err != nil {
			f.t.Errorf("%s: Run: %v", w.name, err)
		}
	case <-time.After(converge):
		f.t.Fatalf("%s: Run did not return after shutdown", w.name)
	}
}

// excused reports whether a lease given up is gone from the store for a
// reason other than an early release: the case revoked it, or it was lost
// (renewals failed on a loaded machine until it ran out), which the
// worker's snapshot shows once its local deadline passed (no later than
// the store's expiry, give or take timer delays).
func (f *fleet) excused(name, target string, token int64) bool {
	f.mu.Lock()
	revoked := f.revoked[leaseID{target, token}]
	w := f.workers[name]
	f.mu.Unlock()
	if revoked {
		return true
	}
	deadline := time.Now().Add(ttl)
	for time.Now().Before(deadline) {
		for _, o := range w.sched.Snapshot().Owned {
			if o.Target == target && o.Token == token && o.State == scheduler.StateLost {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// openGate lets handlers waiting for the gate return.
func (f *fleet) openGate() { f.gateOnce.Do(func() { close(f.gate) }) }

func (f *fleet) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

// handler records each run and checks what the scheduler promises about
// the lease when the context ends.
func (f *fleet) handler(name string) scheduler.Handler {
	return func(ctx context.Context, target string, token int64) {
		r := &run{worker: name, target: target, token: token, started: time.Now(), seen: make(chan struct{}), ended: make(chan struct{})}
		f.mu.Lock()
		if prev := f.byLease[leaseID{target, token}]; prev != nil {
			f.problems = append(f.problems, fmt.Sprintf("%s/%d handed to %s and to %s", target, token, prev.worker, name))
		}
		if prev := f.running[target]; prev != nil {
			f.overlaps = append(f.overlaps, overlap{prev, r})
		}
		f.runs = append(f.runs, r)
		f.byLease[leaseID{target, token}] = r
		f.running[target] = r
		f.mu.Unlock()

		if f.write {
			for ctx.Err() == nil {
				wctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				ok, err := f.h.Resource.Write(wctx, target, token, name)
				cancel()
				if err != nil {
					f.problem("write %s/%d: %v", target, token, err)
				} else if !ok {
					f.mu.Lock()
					f.refused++
					f.refusedBy[r]++
					f.mu.Unlock()
				}
				select {
				case <-ctx.Done():
				case <-time.After(pace):
				}
			}
		}
		<-ctx.Done()
		cause := context.Cause(ctx)
		f.mu.Lock()
		r.cause = cause
		zombie := f.zombies[name]
		f.mu.Unlock()
		close(r.seen)
		for zombie {
			wctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			ok, err := f.h.Resource.Write(wctx, target, token, name)
			cancel()
			f.mu.Lock()
			switch {
			case err != nil:
				f.problems = append(f.problems, fmt.Sprintf("write %s/%d: %v", target, token, err))
			case ok:
				f.zombieAccepted++
			default:
				f.zombieRefused++
				f.refusedBy[r]++
			}
			f.mu.Unlock()
			select {
			case <-f.zombieGate:
				zombie = false
			case <-time.After(pace):
			}
		}
		if errors.Is(cause, scheduler.ErrHandedOver) || errors.Is(cause, scheduler.ErrStopped) || errors.Is(cause, scheduler.ErrRemoved) {
			// Given up, not lost: the lease is released only after the
			// handler returned, so it must still be this run's.
			gctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			res, err := f.admin.Get(gctx, protocol.GetRequest{Key: protocol.Key{Namespace: f.ns, Name: target}})
			cancel()
			if (err != nil || res.Lease.Token != token || res.Lease.Owner != name) && !f.excused(name, target, token) {
				f.problem("%s: %s/%d was given up (%v) but is no longer held while its handler runs: %v %v", name, target, token, cause, res.Lease, err)
			}
		}
		if f.noReturn {
			<-f.gate
		}
		f.mu.Lock()
		if f.running[target] == r {
			delete(f.running, target)
		}
		f.mu.Unlock()
		close(r.ended)
	}
}

// waitFor polls cond until it holds or the deadline passes; then it fails
// the test with cond's last explanation.
func (f *fleet) waitFor(what string, within time.Duration, cond func() (bool, string)) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: not within %v: %s", what, within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listAll returns the live leases of a namespace through the admin handle.
func (f *fleet) listAll(ns string) []protocol.Lease {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var out []protocol.Lease
	cursor := ""
	for {
		res, err := f.admin.List(ctx, protocol.ListRequest{Namespace: ns, Limit: protocol.MaxListLimit, Cursor: cursor})
		if err != nil {
			f.t.Fatalf("list %s: %v", ns, err)
		}
		out = append(out, res.Leases...)
		if res.NextCursor == "" {
			return out
		}
		cursor = res.NextCursor
	}
}

// balanced reports whether the workers hold the given numbers of targets,
// each target held by exactly one of them, and the store agrees: every
// target's live lease is the one its holder's snapshot names.
func (f *fleet) balanced(want map[*worker]int) (bool, string) {
	holder := map[string]scheduler.Owned{}
	owner := map[string]string{}
	var counts []string
	ok := true
	for w, n := range want {
		snap := w.sched.Snapshot()
		held := snap.Held()
		counts = append(counts, fmt.Sprintf("%s=%d (share %d, workers %d)", w.name, len(held), snap.Share, snap.Workers))
		if len(held) != n || snap.Count(scheduler.StateHandingOver, scheduler.StateLost, scheduler.StateStopping) != 0 {
			ok = false
		}
		for _, o := range snap.Owned {
			if prev, dup := owner[o.Target]; dup {
				return false, fmt.Sprintf("%s held by %s and %s", o.Target, prev, w.name)
			}
			owner[o.Target], holder[o.Target] = w.name, o
		}
	}
	slices.Sort(counts)
	if !ok {
		return false, "held: " + strings.Join(counts, ", ")
	}
	leases := f.listAll(f.ns)
	if len(leases) != len(f.targets) {
		return false, fmt.Sprintf("the store has %d live leases, want %d (%s)", len(leases), len(f.targets), strings.Join(counts, ", "))
	}
	for _, l := range leases {
		o, held := holder[l.Key.Name]
		if !held || owner[l.Key.Name] != l.Owner || o.Token != l.Token {
			return false, fmt.Sprintf("the store has %s held by %s with token %d; the snapshots say %s with token %d",
				l.Key.Name, l.Owner, l.Token, owner[l.Key.Name], o.Token)
		}
	}
	return true, ""
}

// noLiveLeases checks that the fleet left no live lease behind, in the
// targets' namespace and the workers'.
func (f *fleet) noLiveLeases() {
	f.t.Helper()
	for _, ns := range []string{f.ns, f.ns + scheduler.WorkersSuffix} {
		if leases := f.listAll(ns); len(leases) != 0 {
			f.t.Errorf("after shutdown %d live leases are left in %s, e.g. %s held by %s", len(leases), ns, leases[0].Key, leases[0].Owner)
		}
	}
}

// check reports the problems the handlers found; two handlers of one
// target that ran at once although the earlier one's lease was not lost (a
// lease given up is released only after its handler returned, so only a
// lost lease's handler may still run when the next one starts); a target
// whose handlers, in the order they started, did not get ever greater
// tokens (each new holder must get a greater token than the one before it,
// or the fenced resource refuses the new holder and lets the old one in);
// and a write the resource refused to a run whose lease was neither lost
// nor handed over (a live lease's writes must get in). Call it after every
// handler returned.
func (f *fleet) check() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.problems {
		f.t.Error(p)
	}
	last := map[string]*run{}
	for _, r := range f.runs { // in the order the handlers started
		if prev := last[r.target]; prev != nil && r.token <= prev.token {
			f.t.Errorf("%s: %s's handler started with token %d after %s's with token %d: a new holder must get a greater token",
				r.target, r.worker, r.token, prev.worker, prev.token)
		}
		last[r.target] = r
	}
	for r, n := range f.refusedBy {
		if !errors.Is(r.cause, protocol.ErrLeaseLost) && !errors.Is(r.cause, scheduler.ErrHandedOver) {
			f.t.Errorf("the resource refused %d writes of %s's handler of %s/%d, whose lease was not lost nor handed over (%v)",
				n, r.worker, r.target, r.token, r.cause)
		}
	}
	for _, o := range f.overlaps {
		if !errors.Is(o.earlier.cause, protocol.ErrLeaseLost) {
			f.t.Errorf("%s: %s's handler (token %d) started while %s's (token %d) ran, whose lease was not lost (%v)",
				o.later.target, o.later.worker, o.later.token, o.earlier.worker, o.earlier.token, o.earlier.cause)
		}
	}
}

// lost returns how many handler runs ended with their lease lost.
func (f *fleet) lost() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.runs {
		if errors.Is(r.cause, protocol.ErrLeaseLost) {
			n++
		}
	}
	return n
}

// runsOf returns the runs of a worker.
func (f *fleet) runsOf(name string) []*run {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*run
	for _, r := range f.runs {
		if r.worker == name {
			out = append(out, r)
		}
	}
	return out
}

// cancelled reports whether the handler saw its context end.
func cancelled(r *run) bool {
	select {
	case <-r.seen:
		return true
	default:
		return false
	}
}

// runningRuns returns the runs of a worker whose context has not ended.
func (f *fleet) runningRuns(name string) []*run {
	var out []*run
	for _, r := range f.runsOf(name) {
		if !cancelled(r) {
			out = append(out, r)
		}
	}
	return out
}

func ended(r *run) bool {
	select {
	case <-r.ended:
		return true
	default:
		return false
	}
}

// testWriter sends the schedulers' logs to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
