package contract

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/leasestore/leasestore/audit"
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
			// waitResult and the cleanup read the outcome again. With a
			// short TTL on a loaded machine the waiter may have slept on
			// holder and taken the key since: its report is then waiting.
			w.done <- o
			for {
				select {
				case l := <-w.waiting:
					if l.Key == holder.Key && l.Token < holder.Token {
						continue
					}
					e.expectHolder("the lease the waiter waits on", &l, holder)
					return
				default:
					e.t.Fatalf("the waiter returned %q (%v) while %s held the key", o.res.Status, o.err, fmtLease(&holder))
				}
			}
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

// deadlineCtx is a context whose deadline passes when expire is called.
type deadlineCtx struct {
	context.Context
	done    chan struct{}
	expired atomic.Bool
}

func newDeadlineCtx(parent context.Context) *deadlineCtx {
	return &deadlineCtx{Context: parent, done: make(chan struct{})}
}

func (c *deadlineCtx) expire() {
	if c.expired.CompareAndSwap(false, true) {
		close(c.done)
	}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
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
			// Long enough for the waiter to meet the holder, subscribe
			// (over HTTP: a request, and the server's own subscription)
			// and meet it again before it expires, on a loaded machine.
			const ttl = time.Second
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
			// A deadline that passes once the waiter sleeps, however long
			// its first attempt took on a loaded machine.
			ctx := newDeadlineCtx(e.ctx)
			w := e.startWait(ctx, e.b, "k", "waiter", leaseTTL)
			e.asleep(w, held)
			ctx.expire()
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

// watchCases: audit.Watch streams one key's (or namespace's) committed
// changes, in order, from the tail or a cursor.
func watchCases() []testCase {
	return []testCase{
		{"one_key_in_order_from_the_tail_then_by_cursor", func(e *env) {
			old := e.acquire(e.a, "k", "before", leaseTTL)
			e.release(e.a, old)
			tail, err := audit.Tail(e.ctx, e.audit, audit.Query{Namespace: e.ns, Key: "k"}, nil)
			if err != nil {
				e.t.Fatalf("tail: %v", err)
			}
			// A follower is held back while any transaction of a
			// PostgreSQL cluster that began before a record is still in
			// progress: on a shared server, other work can hold it for
			// minutes. The deadline is opTimeout without progress while not
			// held back, and at most heldBackLimit in all.
			const heldBackLimit = 5 * time.Minute
			ctx, cancel := context.WithTimeout(e.ctx, heldBackLimit)
			defer cancel()
			var heldBackAt atomic.Int64 // unix nanoseconds of the last held-back report
			got := make(chan audit.Record, 16)
			go func() {
				defer close(got)
				for rec, err := range audit.Watch(ctx, e.audit, audit.Query{Namespace: e.ns, Key: "k", Cursor: tail},
					&audit.WatchConfig{Interval: 5 * time.Millisecond, HeldBack: func(time.Duration) { heldBackAt.Store(time.Now().UnixNano()) }}) {
					if err != nil {
						e.t.Errorf("watch: %v", err)
						return
					}
					got <- rec
				}
			}()
			l := e.acquire(e.a, "k", "w", leaseTTL)
			e.acquire(e.b, "other", "w", leaseTTL)
			if _, err := e.b.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: "w", Token: l.Token, TTL: renewTTL, RequestID: e.rid()}); err != nil {
				e.t.Fatalf("renew: %v", err)
			}
			e.revoke(e.b, "k")
			var recs []audit.Record
			progress := time.Now()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for len(recs) < 3 {
				select {
				case rec, ok := <-got:
					if ok && rec.Owner == "before" {
						// Held back (PostgreSQL) when the tail was found:
						// Tail's doc says such records come through Watch.
						continue
					}
					if !ok {
						if time.Since(time.Unix(0, heldBackAt.Load())) < time.Second {
							e.t.Skipf("the watch was held back for %v by a transaction elsewhere in the cluster; nothing to check", heldBackLimit)
						}
						e.t.Fatalf("the watch ended after %d records, want 3", len(recs))
					}
					recs = append(recs, rec)
					progress = time.Now()
				case <-tick.C:
					if time.Since(progress) > opTimeout && time.Since(time.Unix(0, heldBackAt.Load())) > time.Second {
						e.t.Fatalf("the watch saw %d records in %v and was not held back, want 3", len(recs), opTimeout)
					}
				}
			}
			cancel()
			for range got {
			}
			want := []protocol.Op{protocol.OpAcquire, protocol.OpRenew, protocol.OpRevoke}
			for i, rec := range recs {
				if rec.Op != want[i] || rec.Key != "k" || rec.Namespace != e.ns || rec.Token != l.Token {
					e.t.Fatalf("watched change %d: %+v, want %s of k with token %d", i, rec, want[i], l.Token)
				}
			}
			// Resumed after the acquire: the renew and the revoke, nothing before.
			rctx, rcancel := context.WithTimeout(e.ctx, opTimeout)
			defer rcancel()
			var resumed []audit.Record
			for rec, err := range audit.Watch(rctx, e.audit, audit.Query{Namespace: e.ns, Key: "k", Cursor: audit.EncodeCursor(recs[0].ID)}, nil) {
				if err != nil {
					e.t.Fatalf("resumed watch: %v", err)
				}
				resumed = append(resumed, rec)
				if len(resumed) == 2 {
					break
				}
			}
			if len(resumed) != 2 || resumed[0].ID != recs[1].ID || resumed[1].ID != recs[2].ID {
				e.t.Fatalf("resumed after %d: %+v, want the renew and the revoke", recs[0].ID, resumed)
			}
		}},
	}
}
