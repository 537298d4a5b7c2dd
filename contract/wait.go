package contract

import (
	"context"
	"errors"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// waitOutcome is what a waiter's AcquireWait returned.
type waitOutcome struct {
	res protocol.Result
	err error
}

// waiter is an AcquireWait running in a goroutine of its own.
type waiter struct {
	waiting chan protocol.Lease // each holder the waiter went to sleep on
	done    chan waitOutcome
	cancel  context.CancelFunc
}

// recheck is the WaitConfig.Recheck of the cases. With a backend that
// signals releases it is an hour, so that only a signal (or the holder's
// expiry) can wake a waiter within the suite's deadlines; a backend that
// does not implement protocol.Notifier is tested on the fallback, which
// re-checks every few milliseconds.
func (e *env) recheck() time.Duration {
	if _, ok := e.h.Backend.(protocol.Notifier); ok {
		return time.Hour
	}
	return 20 * time.Millisecond
}

// startWait starts AcquireWait of name for owner through rt, bounded by ctx.
func (e *env) startWait(ctx context.Context, rt *protocol.Runtime, name, owner string, ttl time.Duration) *waiter {
	e.t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	w := &waiter{waiting: make(chan protocol.Lease, 64), done: make(chan waitOutcome, 1), cancel: cancel}
	req := e.acquireReq(name, owner, ttl)
	cfg := &protocol.WaitConfig{Recheck: e.recheck(), Waiting: func(l protocol.Lease) {
		select {
		case w.waiting <- l:
		default:
		}
	}}
	go func() {
		res, err := rt.AcquireWait(ctx, req, cfg)
		w.done <- waitOutcome{res, err}
	}()
	e.t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// asleep waits until w reported that it sleeps on holder.
func (e *env) asleep(w *waiter, holder protocol.Lease) {
	e.t.Helper()
	for {
		select {
		case l := <-w.waiting:
			if l.Key == holder.Key && l.Token < holder.Token {
				continue // a spurious wake-up while an earlier holder held the key
			}
			e.expectHolder("the lease the waiter waits on", &l, holder)
			return
		case o := <-w.done:
			e.t.Fatalf("the waiter returned %q (%v) while %s held the key", o.res.Status, o.err, fmtLease(&holder))
		case <-e.ctx.Done():
			e.t.Fatal("the subtest ended before the waiter went to sleep")
		}
	}
}

// waitResult waits for w's result.
func (e *env) waitResult(w *waiter) waitOutcome {
	e.t.Helper()
	select {
	case o := <-w.done:
		w.done <- o // for the cleanup
		return o
	case <-time.After(opTimeout):
		e.t.Fatalf("the waiter was not woken within %v", opTimeout)
	}
	return waitOutcome{}
}

// expectTaken checks that w acquired name for owner, after prev.
func (e *env) expectTaken(w *waiter, owner string, prev protocol.Lease) protocol.Lease {
	e.t.Helper()
	o := e.waitResult(w)
	e.expect("the waiter's acquire", o.res, o.err, protocol.StatusAcquired)
	if o.res.Lease.Owner != owner || o.res.Lease.Token <= prev.Token || o.res.Lease.Key != prev.Key {
		e.t.Fatalf("the waiter took %s, want %s's lease of %s with a token above %d", fmtLease(o.res.Lease), owner, prev.Key, prev.Token)
	}
	return *o.res.Lease
}

func waitCases() []testCase {
	return []testCase{
		{"woken_by_release_through_other_handle", func(e *env) {
			held := e.acquire(e.b, "k", "holder", leaseTTL)
			w := e.startWait(e.ctx, e.a, "k", "waiter", leaseTTL)
			e.asleep(w, held)
			e.release(e.b, held)
			got := e.expectTaken(w, "waiter", held)
			if cur := e.get(e.b, "k"); cur == nil || cur.Token != got.Token {
				e.t.Fatalf("get after the hand-over: %s, want the waiter's %s", fmtLease(cur), fmtLease(&got))
			}
		}},
		{"woken_by_release_through_same_handle", func(e *env) {
			held := e.acquire(e.a, "k", "holder", leaseTTL)
			w := e.startWait(e.ctx, e.a, "k", "waiter", leaseTTL)
			e.asleep(w, held)
			e.release(e.a, held)
			e.expectTaken(w, "waiter", held)
		}},
		{"woken_by_revoke", func(e *env) {
			held := e.acquire(e.a, "k", "holder", leaseTTL)
			w := e.startWait(e.ctx, e.a, "k", "waiter", leaseTTL)
			e.asleep(w, held)
			e.revoke(e.b, "k")
			e.expectTaken(w, "waiter", held)
		}},
		{"woken_by_expiry", func(e *env) {
			// The wall clock: nothing signals an expiry, so the waiter
			// must sleep until the holder's expires_at and try then.
			e.clock.Real()
			const ttl = 300 * time.Millisecond
			res, err := e.b.Acquire(e.ctx, e.acquireReq("k", "holder", ttl))
			held := *e.expect("acquire by the holder", res, err, protocol.StatusAcquired).Lease
			w := e.startWait(e.ctx, e.a, "k", "waiter", leaseTTL)
			e.asleep(w, held)
			got := e.expectTaken(w, "waiter", held)
			if got.AcquiredAt.Before(held.ExpiresAt) {
				e.t.Fatalf("the waiter took the key at %v, before the holder's lease expired at %v", got.AcquiredAt, held.ExpiresAt)
			}
			// Not a tight loop: one conflict before the sleep, at most a
			// few more if the first try after it came a hair early by the
			// store's clock, and on the fallback one per re-check.
			if n := len(w.waiting); n > 4+int(ttl/e.recheck()) {
				e.t.Fatalf("the waiter met the holder %d more times while it waited for the expiry, want a sleep until it", n)
			}
		}},
		{"cancelled_wait_answers_conflict", func(e *env) {
			held := e.acquire(e.a, "k", "holder", leaseTTL)
			w := e.startWait(e.ctx, e.b, "k", "waiter", leaseTTL)
			e.asleep(w, held)
			w.cancel()
			o := e.waitResult(w)
			e.expect("cancelled wait", o.res, o.err, protocol.StatusConflict)
			e.expectHolder("cancelled wait carries the holder", o.res.Lease, held)
			if !errors.Is(o.err, context.Canceled) {
				e.t.Fatalf("cancelled wait: error %v does not match context.Canceled", o.err)
			}
			if cur := e.get(e.a, "k"); cur == nil || cur.Token != held.Token {
				e.t.Fatalf("after a cancelled wait the key holds %s, want the holder's %s", fmtLease(cur), fmtLease(&held))
			}
		}},
		{"deadline_ends_wait_with_conflict", func(e *env) {
			held := e.acquire(e.a, "k", "holder", leaseTTL)
			ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
			defer cancel()
			w := e.startWait(ctx, e.b, "k", "waiter", leaseTTL)
			o := e.waitResult(w)
			e.expect("wait past its deadline", o.res, o.err, protocol.StatusConflict)
			e.expectHolder("wait past its deadline carries the holder", o.res.Lease, held)
			if !errors.Is(o.err, context.DeadlineExceeded) {
				e.t.Fatalf("wait past its deadline: error %v does not match context.DeadlineExceeded", o.err)
			}
		}},
		{"two_waiters_one_takes_each_release", func(e *env) {
			held := e.acquire(e.a, "k", "holder", leaseTTL)
			w1 := e.startWait(e.ctx, e.a, "k", "w1", leaseTTL)
			w2 := e.startWait(e.ctx, e.b, "k", "w2", leaseTTL)
			e.asleep(w1, held)
			e.asleep(w2, held)
			e.release(e.a, held)
			var first, second *waiter
			var firstOwner, secondOwner string
			select {
			case o := <-w1.done:
				w1.done <- o
				first, second, firstOwner, secondOwner = w1, w2, "w1", "w2"
			case o := <-w2.done:
				w2.done <- o
				first, second, firstOwner, secondOwner = w2, w1, "w2", "w1"
			case <-time.After(opTimeout):
				e.t.Fatalf("neither waiter was woken within %v", opTimeout)
			}
			won := e.expectTaken(first, firstOwner, held)
			// The other one met the winner and sleeps again, on it.
			e.asleep(second, won)
			select {
			case o := <-second.done:
				e.t.Fatalf("both waiters returned: the second with %q %s (%v)", o.res.Status, fmtLease(o.res.Lease), o.err)
			default:
			}
			rt := e.a
			if firstOwner == "w2" {
				rt = e.b
			}
			e.release(rt, won)
			e.expectTaken(second, secondOwner, won)
		}},
		{"closing_the_store_ends_a_wait", func(e *env) {
			held := e.acquire(e.a, "k", "holder", leaseTTL)
			w := e.startWait(e.ctx, e.b, "k", "waiter", leaseTTL)
			e.asleep(w, held)
			if err := e.b.Close(e.ctx); err != nil {
				e.t.Fatalf("close: %v", err)
			}
			o := e.waitResult(w)
			e.expect("wait on a closed store", o.res, o.err, protocol.StatusClosed)
		}},
		{"free_key_is_taken_at_once", func(e *env) {
			w := e.startWait(e.ctx, e.a, "k", "waiter", leaseTTL)
			o := e.waitResult(w)
			e.expect("wait on a free key", o.res, o.err, protocol.StatusAcquired)
			if n := len(w.waiting); n != 0 {
				e.t.Fatalf("the waiter slept %d times on a free key", n)
			}
			if o.res.Lease.Owner != "waiter" {
				e.t.Fatalf("wait on a free key took %s", fmtLease(o.res.Lease))
			}
		}},
	}
}
