package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/textfield"
)

// Notifier is an optional interface of a [Backend] (and of a [Store]): it
// tells waiters that the lease at a key may have ended, by a release or a
// revoke committed by any process sharing the store, so that a blocking
// acquire ([AcquireWait]) wakes at once instead of polling, and so that a
// holder ([Hold], the scheduler, leasectl run) hears at once that its lease
// was revoked. Expiry needs no signal: the waiter sleeps until the holder's
// expiry (plus its lock-delay), which the conflict carries.
//
// Signals are hints: they may be spurious (the waiter tries again and
// meets a conflict), and a backend whose notification channel breaks
// signals every subscriber, since a release may have gone unheard. Every
// shipped backend implements it: memstore and SQLite in-process, SQLite
// across processes through PRAGMA data_version, PostgreSQL through
// LISTEN/NOTIFY on a connection of its own. [*Runtime] implements it when
// its backend does.
type Notifier interface {
	// Subscribe registers interest in key until cancel is called (cancel is
	// idempotent and must be called). Once Subscribe returned, every later
	// release or revoke of key sends on ch (capacity 1: signals that arrive
	// while one is pending merge into it). Subscribe returns an error when
	// the backend cannot deliver signals now (the caller falls back to
	// sleeping) or ctx ends first.
	Subscribe(ctx context.Context, key Key) (ch <-chan struct{}, cancel func(), err error)
}

// CappedNotifier is an optional interface of a [Notifier] whose
// subscriptions each hold a capped resource: an httpapi client's
// subscription is an HTTP stream, and the server bounds the streams open
// at once, per token and in all. A subscription made only to be quicker
// (the scheduler's listening for busy targets' release) could then take
// the stream that a holder's watch of its own lease ([Hold], [WatchLease])
// needs to hear a revoke at once, leaving it to hear of it at its next
// renewal. So a caller that subscribes as an optimization does not
// subscribe to a store whose SubscriptionsCapped is true; watches of
// leases, and [AcquireWait], do.
//
// [*Runtime] implements it by asking its backend: false when the backend
// does not implement it.
type CappedNotifier interface {
	Notifier
	// SubscriptionsCapped reports whether each subscription holds one of a
	// bounded number of resources shared with other subscribers (a
	// server's streams), so that one made as an optimization may keep
	// another from being made. It does not change while the store is open.
	SubscriptionsCapped() bool
}

// ErrNoNotifier is returned by [Runtime.Subscribe] when its backend does
// not implement [Notifier].
var ErrNoNotifier = errors.New("lease: the backend does not signal released keys")

// Subscribe implements [Notifier] by passing the subscription to the
// backend, or fails with [ErrNoNotifier] when the backend cannot signal, or
// with an error of status closed after Close. Making the subscription is
// bounded as an operation is: by the default deadline when ctx has none,
// and by [Runtime.Close], which cuts it short as it starts (the error is
// then of status closed), so that a backend whose Subscribe hangs (a
// listener connection that does not answer) holds neither the caller (an
// [AcquireWait], a [WatchLease]) nor Close. The subscription made lasts
// until its cancel, whatever ctx does afterwards.
func (r *Runtime) Subscribe(ctx context.Context, key Key) (<-chan struct{}, func(), error) {
	n, ok := r.backend.(Notifier)
	if !ok {
		return nil, nil, ErrNoNotifier
	}
	if err := key.Validate(); err != nil {
		return nil, nil, &Error{Status: StatusInvalid, Key: key, Err: err}
	}
	if !r.begin() {
		return nil, nil, &Error{Status: StatusClosed, Key: key, Message: "the store was closed"}
	}
	defer r.end()
	sctx, cancel := r.withDeadline(ctx)
	defer cancel()
	stop := context.AfterFunc(r.closingCtx, cancel)
	defer stop()
	ch, unsubscribe, err := n.Subscribe(sctx, key)
	if err != nil && r.closingCtx.Err() != nil {
		cause, e := err, (*Error)(nil)
		if errors.As(err, &e) { // its cause, not its status: the error matches ErrClosed alone
			cause = e.Err
		}
		return nil, nil, &Error{Status: StatusClosed, Key: key, Message: "the store was closed while the subscription was made", Err: cause}
	}
	return ch, unsubscribe, err
}

var _ CappedNotifier = (*Runtime)(nil)

// SubscriptionsCapped implements [CappedNotifier] by asking the backend;
// false when the backend does not implement it (or cannot signal).
func (r *Runtime) SubscriptionsCapped() bool {
	c, ok := r.backend.(CappedNotifier)
	return ok && c.SubscriptionsCapped()
}

// Defaults of [WaitConfig].
const (
	// DefaultRecheck bounds a waiter's sleep when the store signals
	// releases: a safety net for a signal lost with a dropped connection.
	DefaultRecheck = 30 * time.Second
	// DefaultPollRecheck bounds a waiter's sleep when the store cannot
	// signal: a release is noticed within it.
	DefaultPollRecheck = time.Second
)

// WaitConfig tunes [AcquireWait]. A nil *WaitConfig means all defaults.
// A negative Recheck is refused as invalid, before any attempt is sent.
type WaitConfig struct {
	// Recheck bounds each sleep between attempts. A waiter sleeps until the
	// holder's expiry (by the local clock) or a signal from the store's
	// [Notifier], whichever comes first, but never longer than Recheck.
	// Default: [DefaultRecheck] when the store signals releases,
	// [DefaultPollRecheck] when it does not. Negative: refused as
	// invalid ([AcquireWait], [Hold]).
	Recheck time.Duration
	// Waiting, when set, is called on the waiting goroutine each time an
	// attempt met a live lease and the waiter is about to sleep, with that
	// lease (for logs: "waiting for KEY, held by OWNER until T").
	Waiting func(holder Lease)
}

// minWaitBackoff is the first sleep after a conflict with a lease that
// expired by the local clock but not yet by the store's.
const minWaitBackoff = time.Millisecond

// AcquireWait acquires req, waiting while a live lease holds the key: it
// tries, and on conflict sleeps until the holder's lease ends and tries
// again, until it acquires or ctx ends. It never polls in a tight loop: a
// store that implements [Notifier] ([*Runtime] over any shipped backend)
// wakes it when the holder releases or is revoked, in this process or
// another; otherwise, and for expiry, it sleeps until the holder's expiry,
// re-checking at least every [WaitConfig].Recheck. If the holder's expiry
// has passed by the local clock yet the store still answers conflict (the
// store's clock is behind, or the holder renewed), the sleeps grow from a
// millisecond, doubling, up to Recheck.
//
// Every attempt is an ordinary acquire with req's request id (one is made
// when it is empty), bounded by the store's default deadline within ctx, so
// a conflict is retried as the protocol allows (refusals are not
// recorded), and an attempt whose outcome is unknown can be repeated with
// the same id. The result is the first attempt that did not answer
// conflict: acquired (possibly a replay: see [Hold] on confirming one), or
// a failure such as timeout or closed, which ends the wait.
//
// ctx's deadline bounds the waiting, not an attempt in flight: an attempt
// runs to its answer (within the store's default deadline), so a wait that
// runs out answers conflict, carrying the holder's lease from the last
// attempt, with an error that matches both [ErrConflict] and
// [context.DeadlineExceeded] and a message saying the wait gave up (or
// acquired, when that last attempt took the key); a conflict the store
// said a lock-delay caused stays one ([Result.KeptByLockDelay]). A
// deadline given a cause ([context.WithTimeoutCause]) is a deadline: the
// error matches its cause too. Cancelling ctx also cancels an attempt in
// flight: the answer is then that attempt's timeout (its outcome
// unknown), or conflict matching [context.Canceled] when the waiter was
// asleep. No attempt is sent once ctx is cancelled (nor, after
// the first, once its deadline passed), also when a release signal comes
// at the same moment; a wait cancelled before its first attempt answers
// timeout, as [Runtime.Acquire] does, and sends nothing.
//
// A [Runtime.Close] of s (a [*Runtime]) ends the wait at once, also while
// it sleeps on a store that cannot signal: the attempt that follows
// answers closed, as the wait's result and error (matching [ErrClosed]).
//
// A free key costs one acquire: the subscription to the store's signals is
// made after the first conflict, followed by one more attempt at once (the
// holder may have let go in between). AcquireWait is safe for concurrent
// use; waiters of one key compete, and exactly one of them takes each
// release.
//
// Each attempt's answer is judged, and returned, as a Runtime's
// ([Answer]): over a backend used directly, a failure's result carries
// its status too.
//
// A config AcquireWait cannot follow (a negative Recheck) is answered
// invalid, matching [ErrInvalid], before anything is sent, as [Hold]
// answers it.
func AcquireWait(ctx context.Context, s Store, req AcquireRequest, cfg *WaitConfig) (Result, error) {
	res, _, err := acquireWait(ctx, s, req, cfg)
	return res, err
}

// acquireWait is AcquireWait, also returning when the last attempt was sent.
func acquireWait(ctx context.Context, s Store, req AcquireRequest, cfg *WaitConfig) (Result, time.Time, error) {
	if err := cfg.check(); err != nil {
		e := &Error{Op: OpAcquire, Status: StatusInvalid, Key: req.Key, Message: "wait config", Err: err}
		return Result{Op: OpAcquire, Status: StatusInvalid, Key: req.Key, RequestID: req.RequestID,
			Message: e.Detail()}, time.Time{}, e
	}
	var c WaitConfig
	if cfg != nil {
		c = *cfg
	}
	if req.RequestID == "" {
		req.RequestID = newRequestIDFor(s)
	}
	var wake <-chan struct{}
	subscribed := false
	recheck := c.Recheck
	attemptTimeout := defaultTimeoutOf(s)
	// A Runtime's Close wakes the waiter, whose next attempt answers
	// closed: a store that cannot signal would leave it asleep until its
	// Recheck.
	var closing <-chan struct{}
	if c, ok := s.(closingSignaller); ok {
		closing = c.closingSignal()
	}
	start := time.Now()
	backoff := minWaitBackoff
	var (
		res  Result
		sent time.Time
	)
	for {
		if cancelled(ctx) {
			// Cancelled before this attempt was sent: it is not sent (an
			// attempt would take the key for a caller that gave up). The
			// first answers as Acquire on a cancelled context does.
			if res.Lease == nil {
				e := interrupted(ctx, OpAcquire, "", nil)
				e.Op, e.Key = OpAcquire, req.Key
				return Result{Op: OpAcquire, Status: e.Status, Key: req.Key, RequestID: req.RequestID,
					Message: e.Detail()}, time.Time{}, e
			}
			r, err := waitEnded(ctx, res, start)
			return r, sent, err
		}
		sent = time.Now()
		var err error
		res, err = attempt(ctx, s, req, attemptTimeout)
		if res.Status != StatusConflict || res.Lease == nil {
			return res, sent, err
		}
		if ctx.Err() != nil {
			// The deadline passed (or ctx was cancelled) while the attempt
			// ran: the wait is over, and no further attempt is sent, not
			// even the one that follows the subscription.
			r, err := waitEnded(ctx, res, start)
			return r, sent, err
		}
		if !subscribed {
			subscribed = true
			if n, ok := s.(Notifier); ok {
				if ch, cancel, err := n.Subscribe(ctx, req.Key); err == nil {
					defer cancel()
					wake = ch
				}
			}
			if recheck <= 0 {
				recheck = DefaultRecheck
				if wake == nil {
					recheck = DefaultPollRecheck
				}
			}
			if wake != nil {
				continue // signals from here on: try again, the holder may have let go meanwhile
			}
		}
		holder := *res.Lease
		if c.Waiting != nil {
			c.Waiting(holder)
		}
		sleep := time.Until(holder.FreeAt()) // its expiry, plus its lock-delay
		if sleep <= 0 {
			// Expired by the local clock, not by the store's: back off.
			sleep, backoff = backoff, min(2*backoff, recheck)
		} else {
			backoff = minWaitBackoff
		}
		sleep = min(sleep, recheck)
		timer := time.NewTimer(sleep)
		select {
		case <-wake:
		case <-closing:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			// Also when a signal or the timer was ready at the same
			// moment: no attempt is sent once ctx ended.
			res, err := waitEnded(ctx, res, start)
			return res, sent, err
		}
	}
}

// check refuses a config AcquireWait cannot follow, naming the field and
// the fix ([HoldConfig] reports it among its own). A nil config is the
// defaults.
func (c *WaitConfig) check() error {
	if c == nil || c.Recheck >= 0 {
		return nil
	}
	return fmt.Errorf("wait recheck: %s is negative: set it positive, or zero for the default (%s with signals, %s without)",
		durations.Format(c.Recheck), durations.Format(DefaultRecheck), durations.Format(DefaultPollRecheck))
}

// cancelled reports whether ctx was cancelled (not merely past its
// deadline, which bounds a wait's sleeps, not whether it tries).
func cancelled(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

// newRequestIDFor is [RequestIDFor].
func newRequestIDFor(s Store) string { return RequestIDFor(s) }

// RequestIDFor returns a new request id as s makes them: with the
// generator of its [Config] (NewRequestID) when s is a [*Runtime], else
// [NewRequestID]. Code that keeps a lease over any [Store] (Hold, the
// scheduler) gives each change an id of its own with it: a Store that
// makes none (a backend used directly) would take every change after the
// first sent under the empty id for a repeat of it.
func RequestIDFor(s Store) string {
	if r, ok := s.(*Runtime); ok {
		return r.newReqID()
	}
	return NewRequestID()
}

// attempt runs one acquire of a wait, bounded by timeout: ctx's deadline
// does not cut it short (the wait's deadline bounds its sleeps), its
// cancellation does.
func attempt(ctx context.Context, s Store, req AcquireRequest, timeout time.Duration) (Result, error) {
	detached, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		// ctx.Err, not context.Cause: a deadline given a cause
		// (context.WithTimeoutCause) is still a deadline.
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel(context.Cause(ctx))
		}
	})
	defer stop()
	actx, cancelTimeout := context.WithTimeout(detached, timeout)
	defer cancelTimeout()
	return acquireOn(actx, s, req)
}

// waitEnded turns the last conflict of a wait whose ctx ended into its
// result: conflict with the holder, and an error matching both
// [ErrConflict] and ctx's cause. A conflict the store said a lock-delay
// caused stays one ([Result.KeptByLockDelay]). Its message, judged at the
// time the wait gives up, says when the key is free (or until when the
// holder's lease is live), or, past that on a store that sees it late,
// that the store has not yet freed the key ([Lease.LockDelayText],
// [Lease.ExpiredText]).
func waitEnded(ctx context.Context, last Result, start time.Time) (Result, error) {
	why := "cancelled"
	// The cause too: a caller may end the wait with a deadline of its own
	// as the cause of a cancel (leasectl run's --wait-timeout).
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		why = "the deadline passed"
	}
	l := last.Lease
	gaveUp := fmt.Sprintf("gave up waiting after %s (%s)", durations.Format(time.Since(start).Round(time.Millisecond)), why)
	// The key is not named: Error's Key does (its rule: the message names
	// neither the key nor the cause). A store that judges expiry and the
	// end of a lock-delay late, never early (etcd), may have answered
	// past them: then the message says so, judged now, not that the key
	// is free at (or held until) a time already past.
	now := time.Now()
	switch {
	case last.KeptByLockDelay():
		// The store said the lock-delay of an ended lease, not a live one,
		// keeps the key: keep that verdict, and say when the key is free.
		last.Message = LockDelayPrefix + gaveUp + ": " + l.LockDelayText(now)
	case l.LiveAt(now):
		last.Message = fmt.Sprintf("%s: held by %s with token %d until %s",
			gaveUp, textfield.Shown(l.Owner), l.Token, l.ExpiresAt.UTC().Format(time.RFC3339Nano))
	default:
		last.Message = gaveUp + ": " + l.ExpiredText()
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, ctx.Err()) {
		cause = fmt.Errorf("%w: %w", cause, ctx.Err())
	}
	return last, &Error{Op: OpAcquire, Status: StatusConflict, Key: l.Key, Lease: l, Message: last.Message, Err: cause}
}

// AcquireWait is [AcquireWait] on r: r signals waiters when its backend
// implements [Notifier].
func (r *Runtime) AcquireWait(ctx context.Context, req AcquireRequest, cfg *WaitConfig) (Result, error) {
	return AcquireWait(ctx, r, req, cfg)
}
