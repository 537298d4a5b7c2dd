package schedulertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// Run runs the scheduler suite against the store newHarness makes, each
// case on a store of its own. The cases run one after the other: they run
// on the real clock with TTLs of 2s, and several fleets at once starve each
// other of CPU on a small machine (SQLite under the race detector most), so
// that leases run out for want of CPU rather than for a fault of the
// scheduler; one at a time, the suite takes no longer.
//
//   - Converge: two workers split 60 targets 30/30, a third joins and the
//     three settle at 20/20/20, each target held by one worker as the store
//     says; no two handlers of one target ever run at once (a target is
//     released only after its handler returned); shutdown releases every
//     lease, membership included.
//   - Takeover: one of three workers is cut off from the store right after
//     it renewed its leases (it neither renews nor releases, as a killed
//     process); the other two start a handler on the first of its 20
//     targets within TTL + wakeMargin (they look again as its leases run
//     out, not at their next round) and on the last within TTL + one renew
//     interval + takeoverMargin (unless the survivors lost leases of their
//     own, or a bare timer of the test process woke up, or a list or an
//     acquire of theirs returned, more than lateCall late, on a machine or
//     a store too loaded to say: then that is logged);
//     the cut-off worker's handlers are cancelled as lost. (These bounds,
//     LockDelayBackOff's and MembershipRevokeLockDelay's grow by
//     [Harness].LateExpiry, the store's documented lateness.)
//   - Fencing: handlers write to a fenced resource while leases are revoked
//     and a worker stalls past its TTL; per target, each handler started
//     got a greater token than the one before it; the resource refuses only
//     writes of handlers whose lease was lost or handed over, never those of
//     a live lease; each lease is handled by one handler; every lost lease's
//     handler is cancelled (the stalled worker's while it still cannot reach
//     the store).
//   - Shutdown: shutdown waits for slow handlers, keeps their leases until
//     they return, then releases everything.
//   - HearsRevoke: a revoke reaches the handler of the revoked target
//     through the store's signal, long before the next renewal.
//   - HearsRevokeWhileHandingOver: so does a revoke of a target lease the
//     worker is handing over (its handler cancelled, still finishing): the
//     snapshot and the observer show it lost.
//   - HearsMembershipRevoke: a revoke of the worker's membership lease is
//     heard the same way: it no longer counts itself a member, and joins
//     again at once.
//   - ShutdownStoreDown: a worker holding 30 targets whose store stops
//     answering (every call waits until its deadline), told to stop while
//     a round's renewals wait, cuts the round's calls under way short (by
//     its context, not their deadlines) and shuts down within 6 OpTimeouts
//     (it takes two to three, four should a shutdown renewal come between:
//     its targets are released at once, in one or two batches as the
//     handlers return, each bounded by OpTimeout, then the membership).
//   - LockDelayBackOff: after a target lease with a lock-delay is revoked,
//     the worker tries the target once during the delay, then takes it
//     within a third of a renew interval of the delay's end (unless a
//     timer of the test process woke up, or a list or an acquire of the
//     worker returned, more than lateCall late: then that is logged).
//   - MembershipLapses: a worker cut off from the store right after a
//     round no longer counts itself a member once its membership lease's
//     local deadline passed unrenewed, as its target leases are lost then,
//     not at its next round (unless a timer of the test process woke up
//     more than lateCall late: then that is logged); once the store
//     answers again it joins again and takes its targets back.
//   - MembershipRevokeLockDelay: a revoke of a worker's membership lease
//     that carries a lock-delay (the workers' namespace default) is heard
//     at once; the worker joins again only once the delay has ended, as
//     the store judges, within a third of a renew interval of its end
//     (unless the machine was shown too loaded), trying at most once at
//     once and once a round meanwhile, never in a tight loop; its target
//     leases stay its own.
func Run(t *testing.T, newHarness Factory) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*testing.T, Factory)
	}{
		{"Resource", testResource},
		{"Converge", testConverge},
		{"Takeover", testTakeover},
		{"Fencing", testFencing},
		{"Shutdown", testShutdown},
		{"HearsRevoke", testHearsRevoke},
		{"HearsRevokeWhileHandingOver", testHearsRevokeWhileHandingOver},
		{"HearsMembershipRevoke", testHearsMembershipRevoke},
		{"ShutdownStoreDown", testShutdownStoreDown},
		{"LockDelayBackOff", testLockDelayBackOff},
		{"MembershipLapses", testMembershipLapses},
		{"MembershipRevokeLockDelay", testMembershipRevokeLockDelay},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newHarness)
		})
	}
}

// testResource checks the harness's resource, which the fencing case
// relies on: a lower token is refused, an equal or higher one accepted.
func testResource(t *testing.T, newHarness Factory) {
	r := newHarness(t).Resource
	ctx := context.Background()
	for _, w := range []struct {
		target string
		token  int64
		want   bool
	}{{"a", 5, true}, {"a", 4, false}, {"b", 1, true}, {"a", 5, true}, {"a", 7, true}, {"a", 6, false}} {
		ok, err := r.Write(ctx, w.target, w.token, "w")
		if err != nil || ok != w.want {
			t.Fatalf("write %s/%d: accepted %v (%v), want %v", w.target, w.token, ok, err, w.want)
		}
	}
	acc, err := r.Accepted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(acc); got != "[{a 5 w} {b 1 w} {a 5 w} {a 7 w}]" {
		t.Fatalf("accepted writes %s", got)
	}
}

func testConverge(t *testing.T, newHarness Factory) {
	f := newFleet(t, newHarness, 60)
	w1, w2 := f.start("w1"), f.start("w2")
	f.waitFor("two workers split 60 targets", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w1: 30, w2: 30})
	})
	w3 := f.start("w3")
	f.waitFor("three workers split 60 targets", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w1: 20, w2: 20, w3: 20})
	})
	snap := w3.sched.Snapshot()
	if !snap.Member || snap.Workers != 3 || snap.Targets != 60 || snap.Share != 20 {
		t.Errorf("w3's snapshot: member %v, %d workers, %d targets, share %d; want true, 3, 60, 20", snap.Member, snap.Workers, snap.Targets, snap.Share)
	}
	for _, o := range snap.Owned {
		if o.Token <= 0 || o.Reason == "" || !o.ExpiresAt.After(o.AcquiredAt) {
			t.Errorf("w3's snapshot entry %+v: want a token, a reason and an expiry after the acquire", o)
		}
	}
	// w3's targets came from w1 and w2: handed over, or (on a machine too
	// loaded to renew in time) lost.
	handedOver, lost := 0, 0
	for _, r := range append(f.runsOf("w1"), f.runsOf("w2")...) {
		switch {
		case !ended(r):
		case errors.Is(r.cause, scheduler.ErrHandedOver):
			handedOver++
		case errors.Is(r.cause, protocol.ErrLeaseLost):
			lost++
		}
	}
	if handedOver+lost < 20 {
		t.Errorf("%d handlers of w1 and w2 ended handed over and %d lost; want at least the 20 targets w3 took", handedOver, lost)
	}
	for _, w := range []*worker{w1, w2, w3} {
		f.stop(w)
	}
	f.noLiveLeases()
	for _, r := range f.runs {
		if !ended(r) {
			t.Errorf("%s's handler of %s/%d still runs after Run returned", r.worker, r.target, r.token)
		}
	}
	// Without faults no lease should be lost, unless the machine is so
	// loaded that the store could not renew in time: that is logged, not
	// failed (the scheduler then did what it must).
	if n := f.lost(); n > 0 {
		t.Logf("%d leases were lost: the store did not answer renewals in time", n)
	}
	f.check()
}

func testTakeover(t *testing.T, newHarness Factory) {
	f := newFleet(t, newHarness, 60)
	w1, w2, w3 := f.start("w1"), f.start("w2"), f.start("w3")
	f.waitFor("three workers split 60 targets", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w1: 20, w2: 20, w3: 20})
	})
	// Cut w3 off right after one of its rounds ended: its leases were just
	// renewed, so they run out nearly a full TTL after the cut, the worst
	// moment for the bound.
	select {
	case <-w3.rounds: // a round that ended before now
	default:
	}
	select {
	case <-w3.rounds:
	case <-time.After(converge):
		t.Fatal("w3 ends no round")
	}
	probe := startLatenessProbe()
	defer probe.close()
	w3.fault.drop()
	cut := time.Now()
	victims := f.runningRuns("w3")
	// Taken means a handler runs on another worker: the lease alone can be
	// in the store a moment before the scheduler that took it calls the
	// handler.
	takenAfterCut := func(v *run) *run {
		var first *run
		for _, r := range append(f.runsOf("w1"), f.runsOf("w2")...) {
			if r.target == v.target && r.started.After(cut) && (first == nil || r.started.Before(first.started)) {
				first = r
			}
		}
		return first
	}
	f.waitFor("the other two take w3's targets and run their handlers", converge, func() (bool, string) {
		if ok, why := f.balanced(map[*worker]int{w1: 30, w2: 30}); !ok {
			return false, why
		}
		for _, v := range victims {
			if takenAfterCut(v) == nil {
				return false, fmt.Sprintf("w1 and w2 hold all 60 targets, but neither runs a handler of w3's %s yet", v.target)
			}
		}
		return true, ""
	})
	// The takeover starts when the first of w3's targets gets a handler on
	// another worker, and ends when the last one does.
	var firstTook, took time.Duration
	var last string
	for _, v := range victims {
		first := takenAfterCut(v)
		d := first.started.Sub(cut)
		if firstTook == 0 || d < firstTook {
			firstTook = d
		}
		if d > took {
			took, last = d, fmt.Sprintf("%s by %s", v.target, first.worker)
		}
	}
	t.Logf("w3's %d targets were taken from %v to %v after w3 was cut off (the last: %s; TTL %v, renew every %v)",
		len(victims), firstTook.Round(time.Millisecond), took.Round(time.Millisecond), last, ttl, renewEvery)
	// A survivor that lost leases of its own could not renew in time: the
	// machine was too loaded for the timing to say anything about the
	// scheduler (as in Converge, that is logged, not failed).
	starved := 0
	for _, r := range append(f.runsOf("w1"), f.runsOf("w2")...) {
		if cancelled(r) && errors.Is(r.cause, protocol.ErrLeaseLost) {
			starved++
		}
	}
	// So does a timer of this process that woke up late during the
	// takeover, or a list of w1 or w2 that took long: a take waits for
	// about four such steps.
	from, to := cut.Add(ttl-renewEvery), cut.Add(took)
	late := probe.worst(from, to)
	slow := max(w1.fault.lists.worst(from, to), w2.fault.lists.worst(from, to))
	slowAcquire := max(w1.fault.acquires.worst(from, to), w2.fault.acquires.worst(from, to))
	var loaded string
	switch {
	case starved > 0:
		loaded = fmt.Sprintf("w1 and w2 lost %d leases of their own during the case: the machine is too loaded", starved)
	case late > lateCall:
		loaded = fmt.Sprintf("a %v timer of this process woke up %v late during the takeover (more than %v): the machine is too loaded",
			latenessTick, late.Round(time.Millisecond), lateCall)
	case slow > lateCall:
		loaded = fmt.Sprintf("a list of w1 or w2 took %v during the takeover (more than %v): the machine is too loaded",
			slow.Round(time.Millisecond), lateCall)
	case slowAcquire > lateCall:
		// The survivors take w3's targets one acquire after another: 20
		// acquires that wait for the store set the pace, not the scheduler.
		loaded = fmt.Sprintf("an acquire of w1 or w2 took %v during the takeover (more than %v): the store is too slow",
			slowAcquire.Round(time.Millisecond), lateCall)
	}
	report := t.Errorf
	if loaded != "" {
		report = func(format string, args ...any) {
			t.Logf(format+"; not failed: %s to hold the takeover to a bound", append(args, loaded)...)
		}
	}
	// A store that judges expiry late frees the targets that much later.
	lateness := f.h.lateness()
	if bound := ttl + wakeMargin + f.h.LateExpiry; firstTook > bound {
		report("the first of w3's targets was taken %v after the cut, more than TTL + %v%s (%v): the survivors did not look again as its leases ran out",
			firstTook, wakeMargin, lateness, bound)
	}
	if bound := ttl + renewEvery + takeoverMargin + f.h.LateExpiry; took > bound {
		report("the last of w3's targets was taken %v after the cut, more than TTL + one renew interval + a margin of %v%s (%v)",
			took, takeoverMargin, lateness, bound)
	}
	f.waitFor("w3's handlers are cancelled as lost", converge, func() (bool, string) {
		for _, r := range victims {
			if !cancelled(r) {
				return false, fmt.Sprintf("w3's handler of %s/%d still runs", r.target, r.token)
			}
		}
		return true, ""
	})
	for _, r := range victims {
		if !errors.Is(r.cause, protocol.ErrLeaseLost) {
			t.Errorf("w3's handler of %s/%d ended with %v, want a lost lease", r.target, r.token, r.cause)
		}
	}
	for _, w := range []*worker{w1, w2, w3} {
		f.stop(w)
	}
	f.noLiveLeases()
	f.check()
}

func testFencing(t *testing.T, newHarness Factory) {
	f := newFleet(t, newHarness, 12)
	f.write = true
	w1, w2, w3 := f.start("w1"), f.start("w2"), f.start("w3")
	f.waitFor("three workers split 12 targets", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w1: 4, w2: 4, w3: 4})
	})

	// Revoke leases while their handlers write; each time, wait until a
	// successor holds the target.
	var revoked []leaseID
	for range 8 {
		leases := f.listAll(f.ns)
		if len(leases) == 0 {
			t.Fatal("no live lease to revoke")
		}
		l := leases[rand.IntN(len(leases))]
		f.mu.Lock()
		f.revoked[leaseID{l.Key.Name, l.Token}] = true // before the revoke: its handler may look at once
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_, err := f.admin.Revoke(ctx, protocol.RevokeRequest{Key: l.Key, Actor: "schedulertest", Reason: "force a loss", Token: l.Token})
		cancel()
		if err != nil {
			continue // renewed, lost or handed over meanwhile: pick another
		}
		revoked = append(revoked, leaseID{l.Key.Name, l.Token})
		f.waitFor("a successor holds "+l.Key.Name, converge, func() (bool, string) {
			for _, m := range f.listAll(f.ns) {
				if m.Key == l.Key && m.Token > l.Token {
					return true, ""
				}
			}
			return false, "no newer lease"
		})
	}
	f.waitFor("the revoked leases' handlers are cancelled", converge, func() (bool, string) {
		for _, id := range revoked {
			f.mu.Lock()
			r := f.byLease[id]
			f.mu.Unlock()
			if r == nil {
				return false, fmt.Sprintf("no handler ran for %s/%d", id.target, id.token)
			}
			if !cancelled(r) {
				return false, fmt.Sprintf("%s's handler of %s/%d still runs", r.worker, id.target, id.token)
			}
		}
		return true, ""
	})
	for _, id := range revoked {
		f.mu.Lock()
		r := f.byLease[id]
		f.mu.Unlock()
		if !errors.Is(r.cause, protocol.ErrLeaseLost) && !errors.Is(r.cause, scheduler.ErrHandedOver) {
			t.Errorf("%s's handler of revoked %s/%d ended with %v, want a lost lease", r.worker, id.target, id.token, r.cause)
		}
	}

	// Stall w3 past its TTL: its handlers keep writing, its store calls hang.
	f.waitFor("three workers split 12 targets again", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w1: 4, w2: 4, w3: 4})
	})
	stalled := f.runningRuns("w3")
	f.mu.Lock()
	f.zombies["w3"] = true // its handlers write on after their context ended
	f.mu.Unlock()
	w3.fault.pause()
	f.waitFor("w3's handlers are cancelled while it cannot reach the store", converge, func() (bool, string) {
		for _, r := range stalled {
			if !cancelled(r) {
				return false, fmt.Sprintf("w3's handler of %s/%d still runs", r.target, r.token)
			}
		}
		return true, ""
	})
	for _, r := range stalled {
		if !errors.Is(r.cause, protocol.ErrLeaseLost) && !errors.Is(r.cause, scheduler.ErrHandedOver) {
			t.Errorf("stalled w3's handler of %s/%d ended with %v, want a lost lease", r.target, r.token, r.cause)
		}
	}
	f.waitFor("w1 and w2 take the stalled worker's targets", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w1: 6, w2: 6})
	})
	f.waitFor("the resource refuses the stalled worker's writes", converge, func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.zombieRefused > 0, "no write of w3's handlers refused yet"
	})
	close(f.zombieGate)
	w3.fault.resume()
	f.waitFor("three workers split 12 targets after w3 is back", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w1: 4, w2: 4, w3: 4})
	})
	for _, w := range []*worker{w1, w2, w3} {
		f.stop(w)
	}
	f.noLiveLeases()
	f.check()

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	acc, err := f.h.Resource.Accepted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The resource refuses lower tokens by construction (testResource), so
	// the order of its accepted writes proves nothing about the scheduler;
	// f.check above does: tokens grow per target from holder to holder, and
	// only lost or handed-over leases' writes were refused.
	perLease := map[leaseID]int{}
	for _, w := range acc {
		id := leaseID{w.Target, w.Token}
		perLease[id]++
		if r := f.byLease[id]; r == nil || r.worker != w.Writer {
			t.Errorf("accepted write of %s/%d by %s, but the scheduler gave that lease to %v", w.Target, w.Token, w.Writer, r)
		}
	}
	working := 0
	for _, id := range revoked {
		if perLease[id] > 0 {
			working++
		}
	}
	if working == 0 {
		t.Errorf("none of the %d revoked leases had a write accepted: the case revoked no working lease", len(revoked))
	}
	t.Logf("%d writes accepted over %d leases; %d refused; %d leases revoked; %d handlers of the stalled worker cancelled; "+
		"it wrote on after that: %d writes accepted (before a successor's), %d refused",
		len(acc), len(perLease), f.refused, len(revoked), len(stalled), f.zombieAccepted, f.zombieRefused)
}

func testShutdown(t *testing.T, newHarness Factory) {
	f := newFleet(t, newHarness, 3)
	f.noReturn = true
	w := f.start("w1")
	f.waitFor("one worker holds 3 targets", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w: 3})
	})
	w.cancel()
	f.waitFor("the handlers see the shutdown", converge, func() (bool, string) {
		snap := w.sched.Snapshot()
		return snap.Count(scheduler.StateStopping) == 3, fmt.Sprintf("%+v", snap.Owned)
	})
	// The handlers have not returned: the leases are renewed while they
	// finish, and still held. (A lease the worker lost meanwhile, on a
	// machine too loaded to renew in time, is left out.)
	stopping := w.sched.Snapshot().Owned
	f.waitFor("the leases are renewed while the handlers finish", converge, func() (bool, string) {
		now := w.sched.Snapshot().Owned
		if len(now) != len(stopping) {
			return false, fmt.Sprintf("%+v", now)
		}
		renewed := 0
		for i, o := range now {
			switch {
			case o.State == scheduler.StateLost:
			case o.State != scheduler.StateStopping || !o.ExpiresAt.After(stopping[i].ExpiresAt):
				return false, fmt.Sprintf("%+v", now)
			default:
				renewed++
			}
		}
		return renewed > 0, fmt.Sprintf("%+v", now)
	})
	live := map[string]protocol.Lease{}
	for _, l := range f.listAll(f.ns) {
		live[l.Key.Name] = l
	}
	for _, o := range w.sched.Snapshot().Owned {
		if o.State != scheduler.StateStopping {
			continue
		}
		if l, ok := live[o.Target]; (!ok || l.Owner != "w1" || l.Token != o.Token) && !f.excused("w1", o.Target, o.Token) {
			t.Errorf("the store has %s as %+v while w1's handler (token %d) still runs after shutdown began", o.Target, l, o.Token)
		}
	}
	select {
	case err := <-w.done:
		t.Fatalf("Run returned (%v) before its handlers did", err)
	default:
	}
	f.openGate()
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(converge):
		t.Fatal("Run did not return after its handlers did")
	}
	w.cancel = nil
	f.noLiveLeases()
	if n := len(w.sched.Snapshot().Owned); n != 0 {
		t.Errorf("the snapshot after Run returned lists %d targets", n)
	}
	f.check()
}

func testShutdownStoreDown(t *testing.T, newHarness Factory) {
	const targets = 30
	f := newFleet(t, newHarness, targets)
	w := f.start("w1")
	f.waitFor("one worker holds 30 targets", converge, func() (bool, string) {
		return f.balanced(map[*worker]int{w: targets})
	})
	w.fault.pause()
	defer w.fault.resume()
	// Stop the worker once a round began: its renewals then wait for the
	// store, for up to the leases' local deadline.
	f.waitFor("a round of the paused worker begins", converge, func() (bool, string) {
		return w.fault.pausedRenewals.Load() > 0, "no renewal waits"
	})
	began := time.Now()
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(converge):
		t.Fatalf("Run did not return within %v of its context's end while the store did not answer", converge)
	}
	took := time.Since(began)
	t.Logf("Run returned %v after its context ended, the store not answering (TTL %v, OpTimeout %v, %d targets)",
		took.Round(time.Millisecond), ttl, renewEvery, targets)
	// The round's calls under way when the context ended are cut short
	// by it, not left to run to their deadlines.
	ranOn := 0
	for _, c := range w.fault.pausedCalls() {
		if c.began.Before(began) && c.end.After(began) && !errors.Is(c.err, context.Canceled) {
			if ranOn == 0 {
				t.Errorf("a %s under way when Run's context ended waited %v after it, until its deadline: the round was not cut short",
					c.op, c.end.Sub(began).Round(time.Millisecond))
			}
			ranOn++
		}
	}
	if ranOn > 1 {
		t.Errorf("%d calls under way when Run's context ended ran on until their deadlines", ranOn)
	}
	// Then the releases go out at once, in one or two batches as the
	// handlers return, then the membership's: two to three OpTimeouts,
	// a fourth should a shutdown renewal come between. The bound leaves
	// two more for a loaded machine; releases one after the other would
	// take one OpTimeout per target.
	if bound := 6 * renewEvery; took > bound {
		t.Errorf("Run returned %v after its context ended while the store did not answer; want within %v "+
			"(the round's renewals cut short, the releases at once, then the membership's, each bounded by OpTimeout %v)",
			took.Round(time.Millisecond), bound, renewEvery)
	}
	for _, r := range f.runs {
		if !ended(r) {
			t.Errorf("%s's handler of %s/%d still runs after Run returned", r.worker, r.target, r.token)
		}
	}
	f.check()
}
