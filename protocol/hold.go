package protocol

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/textfield"
)

// HoldConfig tunes [Hold]. A nil *HoldConfig means all defaults.
//
// [Hold] refuses, as invalid and before acquiring anything, a config that
// cannot keep the lease: a negative duration (Wait.Recheck included), or
// a RenewEvery not shorter than the TTL (the lease would run out before
// its first renewal).
type HoldConfig struct {
	// RenewEvery is the interval between renewals, shorter than the TTL.
	// Default (zero): a third of the TTL, so two renewals can fail in a
	// row before the lease runs out.
	RenewEvery time.Duration
	// RenewTimeout bounds each renewal. Default (zero): RenewEvery.
	RenewTimeout time.Duration
	// Wait, when non-nil, makes Hold wait for a key that is held, as
	// [AcquireWait] does with this config, instead of returning conflict.
	// Default: nil, no waiting.
	Wait *WaitConfig
}

// Held is a lease kept alive in the background by [Hold]. Its context is
// cancelled as soon as the lease is lost or released. Loss is heard at
// once when the store signals it ([Notifier], every shipped backend and
// the HTTP client): a revoke, or a release by someone else with the
// token, each confirmed by a get (see [WatchLease]). No signal is sent for
// an expiry (etcd alone signals the end of its etcd lease): that, and
// every loss when the store cannot signal, is heard at the next renewal
// (refused, or none successful before the lease would run out by the
// local clock). The local deadline runs from before the last successful
// renewal was sent, so it ends before the store's expiry while both
// clocks run alike, but not always: Go's timers stop while the host is
// suspended (on Linux), and the store's clock may be stepped forward, so
// a lease may have run out in the store while its context is still live.
// The fencing token, checked by the resource, is what protects it from a
// holder that does not know it lost its lease (see docs/holding.md). A renewal the
// store refuses for the credentials or their permission ([ErrUnauthenticated],
// [ErrForbidden]) is a refusal too: a retry would be refused again, so
// the lease is lost at once (it stays in the store until its TTL). So is a
// renewal a store refuses until its process restarts
// ([ErrRestartRequired]: a SQLite file put back under it, an etcd cluster
// whose revision went back, over HTTP too): no lease of such a store can
// be trusted, and no retry mends it.
// A [Runtime.Close] of the store it was taken through (a [*Runtime])
// ends it at once too, with a cause matching [ErrLeaseLost] and
// [ErrClosed]: nothing renews the lease after that. So does the close of
// any store under it that signals its subscribers as it closes (every
// shipped backend; a Runtime over one, or a wrapper that passes Subscribe
// on): the get that follows the signal answers closed (see [WatchLease]).
// Work done under the lease should use [Held.Context] and pass
// [Held.Token] to every fenced resource.
//
// A Held is safe for concurrent use. Its renewal goroutine ends when the
// lease is lost or released; call [Held.Release] (or cancel the context
// given to Hold) to end it.
type Held struct {
	store   Store
	req     AcquireRequest
	token   int64
	timeout time.Duration // of each renewal, and of a release whose context has ended
	ctx     context.Context
	cancel  context.CancelCauseFunc
	done    chan struct{}

	mu    sync.Mutex
	lease Lease

	// The release: its request id, made by the first Release and sent
	// again by a Release after an unknown outcome, and the first known
	// outcome, which later calls answer.
	relMu    sync.Mutex
	relID    string
	released bool
	relErr   error

	// releaseHook, set by tests only, is called by Release once it found
	// the lease not yet released, before it stops the renewals.
	releaseHook func()
}

// ErrLeaseLost is the cause of a [Held]'s context when the lease was lost.
var ErrLeaseLost = errors.New("lease: lost")

// lostError is [ErrLeaseLost] with the reason: it matches both, and its
// text says "lease: lost: " once, not before the reason's own "lease: "
// (a *Error reads "lease: renew KEY: not_found: ...").
type lostError struct {
	why error
	// byClock: given up by the local clock, no renewal having answered
	// before the lease would run out; the store may still hold it (the
	// renewals took effect and only their answers were lost).
	byClock bool
}

// LeaseLost returns the cause a holder's context ends with when why lost
// its lease, as a [Held]'s does: it matches [ErrLeaseLost] and why, and
// reads "lease: lost: " once before the reason, not before the reason's
// own "lease: ". For holders built on the protocol (the scheduler, say).
func LeaseLost(why error) error { return &lostError{why: why} }

// lostByClock returns the cause of a Held's context when the lease was
// given up by the local clock: why says how.
func lostByClock(why error) error { return &lostError{why: why, byClock: true} }

func (e *lostError) Error() string {
	return ErrLeaseLost.Error() + ": " + strings.TrimPrefix(e.why.Error(), "lease: ")
}

func (e *lostError) Unwrap() []error { return []error{ErrLeaseLost, e.why} }

// Hold acquires req and renews it in the background until it is released or
// lost. It returns the acquire's error (for example one matching
// [ErrConflict]) when the lease cannot be taken. ctx bounds the whole hold:
// cancelling it stops renewals and cancels the Held's context, but does not
// release the lease: call [Held.Release] (it works on the cancelled ctx
// too), or the lease expires after its TTL.
//
// A replayed acquire (req.RequestID was used before, say by a retry after a
// timeout) is history, not proof of holding now: Hold confirms it with a
// renew under a fresh request id before returning, and the Held then carries
// the renewed lease (the replayed one when the renew answered renewed
// without a copy of it, as a served store's "lease": null does). If that renew fails, Hold returns its error and no
// Held: when the lease is gone (an error matching [ErrNotFound],
// [ErrStaleToken], [ErrNotOwner] or [ErrExpired]) acquire with a new request
// id; when the outcome is unknown ([ErrTimeout], [ErrUnavailable]) call Hold
// again with the same one.
//
// When req.RequestID is empty Hold makes one; when the acquire's outcome is
// unknown (timeout, unavailable) the error names it, so that the caller can
// call Hold again with it and learn whether the lease was taken. An
// acquire the store refused for the credentials or their permission
// ([ErrUnauthenticated], [ErrForbidden]) took nothing and is refused again:
// its error does not ask for another call.
//
// s may be a [*Runtime] or a [Backend] used directly (an httpapi client):
// every answer is judged as a Runtime's ([Answer]), so a conflict a
// backend answers with a nil error is still a conflict.
func Hold(ctx context.Context, s Store, req AcquireRequest, cfg *HoldConfig) (*Held, error) {
	if err := cfg.check(req.TTL); err != nil {
		return nil, &Error{Op: OpAcquire, Status: StatusInvalid, Key: req.Key, Message: "hold config", Err: err}
	}
	if req.RequestID == "" {
		req.RequestID = newRequestIDFor(s)
	}
	sent := time.Now()
	var res Result
	var err error
	if cfg != nil && cfg.Wait != nil {
		// The lease runs from the attempt that took it, not from the wait's start.
		res, sent, err = acquireWait(ctx, s, req, cfg.Wait)
	} else {
		res, err = acquireOn(ctx, s, req)
	}
	if st := StatusOf(err); (st == StatusTimeout || st == StatusUnavailable) && !CredentialsRefused(err) {
		return nil, fmt.Errorf("%w (request id %s: call Hold again with it to learn the outcome)", err, req.RequestID)
	}
	if err != nil {
		return nil, err
	}
	if res.Lease == nil {
		return nil, fmt.Errorf("lease: acquire of %s answered %s without a lease", req.Key, res.Status)
	}
	if res.RequestID != "" { // a backend used directly need not say it
		req.RequestID = res.RequestID
	}
	lease := *res.Lease
	if res.Replayed {
		sent = time.Now()
		if lease, err = confirm(ctx, s, req, lease); err != nil {
			return nil, err
		}
	}
	every, timeout := req.TTL/3, time.Duration(0)
	if cfg != nil {
		if cfg.RenewEvery > 0 {
			every = cfg.RenewEvery
		}
		timeout = cfg.RenewTimeout
	}
	if timeout <= 0 {
		timeout = every
	}
	hctx, cancel := context.WithCancelCause(ctx)
	h := &Held{store: s, req: req, token: lease.Token, timeout: timeout, ctx: hctx, cancel: cancel,
		done: make(chan struct{}), lease: lease}
	// The local deadline is measured from before the acquire (or the renew
	// confirming a replay) was sent, so it is earlier than the backend's
	// view of the expiry while the two clocks run alike (not across a
	// suspension of the host, nor a step of the store's clock).
	var listeners sync.WaitGroup
	listeners.Go(func() {
		WatchLease(hctx, s, lease, timeout, func(why error) { cancel(LeaseLost(why)) })
	})
	if c, ok := s.(closingSignaller); ok {
		// The runtime's Close ends the hold at once: nothing renews the
		// lease from then on (and the renewal in flight is cut short, so
		// that Close need not wait for it).
		listeners.Go(func() {
			select {
			case <-c.closingSignal():
				cancel(LeaseLost(&Error{Status: StatusClosed, Key: req.Key,
					Message: "the store was closed while the lease was held: it is renewed no more and runs out after its TTL"}))
			case <-hctx.Done():
			}
		})
	}
	go func() {
		h.renewLoop(sent, every, timeout)
		listeners.Wait()
		close(h.done)
	}()
	return h, nil
}

// check refuses a config that cannot keep a lease of ttl: each error
// names the field and the fix. A nil config is the defaults.
func (c *HoldConfig) check(ttl time.Duration) error {
	if c == nil {
		return nil
	}
	var errs []error
	switch {
	case c.RenewEvery < 0:
		errs = append(errs, fmt.Errorf("renew every: %s is negative: set it positive and shorter than the ttl, or zero for the default (a third of the ttl)", durations.Format(c.RenewEvery)))
	case c.RenewEvery >= ttl && ttl > 0:
		errs = append(errs, fmt.Errorf("renew every: %s is not shorter than the ttl %s: the lease would run out before its first renewal; "+
			"set it shorter, or zero for the default (a third of the ttl)", durations.Format(c.RenewEvery), durations.Format(ttl)))
	}
	if c.RenewTimeout < 0 {
		errs = append(errs, fmt.Errorf("renew timeout: %s is negative: set it positive, or zero for the default (RenewEvery)", durations.Format(c.RenewTimeout)))
	}
	if err := c.Wait.check(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closingSignaller is a store that tells its holders it is closing:
// [*Runtime].
type closingSignaller interface {
	closingSignal() <-chan struct{}
}

// WatchLease hears at once that l is lost: it subscribes to l's key when s
// is a [Notifier], and each time the store signals that the key's lease
// may have ended (and once when the subscription is live, for a change
// just before it), it reads the key with a get bounded by timeout (zero
// or negative: the default deadline, the Runtime's DefaultTimeout when s
// is a [*Runtime], else [DefaultTimeout]). When
// the key has no live lease or another lease holds it, it calls lost
// once, with why (matching [ErrNotFound] when no lease is live), and
// returns. A store closed under the subscription signals it as it closes
// (every shipped one does), and its get then answers closed: it never
// answers again, so the lease can be neither confirmed nor renewed, and
// WatchLease reports that as the end too, at once (why matching
// [ErrClosed]). A get that fails otherwise (timeout, unavailable) tells
// nothing: the holder's renewals decide. A subscription that fails (a
// server's stream cap, a listener connection that cannot be opened now)
// is made again, after a pause from 50ms doubling up to 5s, with jitter,
// so that the store's signal tells of a loss again as soon as it can. It
// returns when ctx ends, or at once when s cannot signal ([ErrNoNotifier])
// or is closed before the subscription is made: then renewals alone tell
// the loss.
//
// A get's answer is judged as a Runtime's ([Answer]): over a backend used
// directly, its not_found with a nil error is a loss too.
//
// [Hold] and the scheduler call it for every lease they hold; it is for
// code that keeps a lease alive itself. It costs a subscription (on
// PostgreSQL an advisory lock on the store's listener connection; over
// HTTP a notification stream) and a get per signal.
func WatchLease(ctx context.Context, s Store, l Lease, timeout time.Duration, lost func(why error)) {
	n, ok := s.(Notifier)
	if !ok {
		return
	}
	if timeout <= 0 {
		timeout = defaultTimeoutOf(s)
	}
	var ch <-chan struct{}
	var unsubscribe func()
	for pause := watchMinPause; ; pause = min(2*pause, watchMaxPause) {
		var err error
		ch, unsubscribe, err = n.Subscribe(ctx, l.Key)
		if err == nil {
			break
		}
		if errors.Is(err, ErrNoNotifier) || StatusOf(err) == StatusClosed || StatusOf(err) == StatusInvalid || ctx.Err() != nil {
			return
		}
		t := time.NewTimer(time.Duration(float64(pause) * (0.5 + rand.Float64())))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	defer unsubscribe()
	for {
		if why := stillHeld(ctx, s, l, timeout); why != nil {
			lost(why)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// The pause of [WatchLease] between subscriptions that failed: from
// watchMinPause, doubling, up to watchMaxPause, each with ±50% jitter.
const (
	watchMinPause = 50 * time.Millisecond
	watchMaxPause = 5 * time.Second
)

// stillHeld reads l's key and returns why l is lost (the store answered
// closed included), nil when l still holds it or the read told nothing.
func stillHeld(ctx context.Context, s Store, l Lease, timeout time.Duration) error {
	gctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := getOn(gctx, s, GetRequest{Key: l.Key})
	switch {
	case ctx.Err() != nil:
		return nil
	case err == nil && res.Lease != nil && res.Lease.Token == l.Token && res.Lease.Owner == l.Owner:
		return nil
	case err == nil && res.Lease != nil:
		return fmt.Errorf("the store signalled its end; %s holds the key with token %d", textfield.Shown(res.Lease.Owner), res.Lease.Token)
	case StatusOf(err) == StatusNotFound:
		return fmt.Errorf("the store signalled its end (revoked, released or run out): %w", err)
	case StatusOf(err) == StatusClosed:
		return closedUnder(err)
	}
	return nil
}

// closedUnder returns why a lease is lost when its store answered closed
// (err): it matches [ErrClosed].
func closedUnder(err error) error {
	return fmt.Errorf("the store was closed while the lease was held: it is renewed no more and runs out after its TTL: %w", err)
}

// confirm renews replayed, the lease of a replayed acquire of req, under
// a fresh request id, and returns the renewed lease: replayed itself when
// the renew answered renewed without a copy of it (a served store's
// "lease": null), which renewed it all the same.
func confirm(ctx context.Context, s Store, req AcquireRequest, replayed Lease) (Lease, error) {
	token := replayed.Token
	res, err := renewOn(ctx, s, RenewRequest{Key: req.Key, Owner: req.Owner, Token: token, TTL: req.TTL,
		RequestID: newRequestIDFor(s)})
	switch st := StatusOf(err); {
	case CredentialsRefused(err):
		return Lease{}, fmt.Errorf("lease: could not confirm replayed acquire %s (token %d): %w", req.RequestID, token, err)
	case st == "":
	case st == StatusNotFound, st == StatusStaleToken, st == StatusNotOwner, st == StatusExpired:
		return Lease{}, fmt.Errorf("lease: replayed acquire %s no longer holds token %d, acquire with a new request id: %w",
			req.RequestID, token, err)
	case st == StatusTimeout, st == StatusUnavailable:
		return Lease{}, fmt.Errorf("lease: could not confirm replayed acquire %s (token %d), retry with the same request id: %w",
			req.RequestID, token, err)
	default:
		return Lease{}, fmt.Errorf("lease: could not confirm replayed acquire %s (token %d): %w", req.RequestID, token, err)
	}
	if res.Lease == nil {
		return replayed, nil
	}
	return *res.Lease, nil
}

// Token returns the lease's fencing token.
func (h *Held) Token() int64 { return h.token }

// Lease returns the lease as of the last successful acquire or renew.
func (h *Held) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// Context is cancelled when the lease is lost or released; context.Cause
// then tells which ([ErrLeaseLost] wrapped with the reason, or
// context.Canceled after Release).
func (h *Held) Context() context.Context { return h.ctx }

// Done is closed when the renewal goroutine (and the one that listens for
// the store's signals) has ended.
func (h *Held) Done() <-chan struct{} { return h.done }

// Release stops renewing and releases the lease. It returns the release's
// error; a lease lost before the renewals stopped (the loss heard while
// Release runs included) answers with the loss's cause instead.
//
// A lease given up by the local clock (no renewal answered before it would
// run out) may still be live in the store, when the renewals took effect
// and only their answers were lost: Release then sends the release all the
// same, once, so that the key is free at once instead of after the lease's
// TTL (and then its lock-delay), and answers the loss's cause whatever the
// store answers. A lease the store ended (a refused renewal, a revoke or
// another holder it signalled) is not released again. As after any loss,
// call Release once the work under the lease has stopped: a release lets
// another holder in.
//
// The release runs even when ctx is cancelled, as the context given to Hold
// usually is when a deferred Release runs at shutdown: it keeps ctx's
// values, not its cancellation, and is bounded by ctx's deadline while that
// is ahead, else by the renewal timeout ([HoldConfig.RenewTimeout]).
//
// Release may be called again, from any goroutine: once a release had a
// known outcome, later calls answer it; after an unknown one (timeout,
// unavailable, but not a refusal of the credentials, which is final) the
// next call sends the release again under the same request id, so that
// the store answers what the first one did.
func (h *Held) Release(ctx context.Context) error {
	h.relMu.Lock()
	defer h.relMu.Unlock()
	if h.released {
		return h.relErr
	}
	if h.releaseHook != nil {
		h.releaseHook()
	}
	// The renewals stop first, and the cause is read after: a loss heard
	// until the cancel stays the cause (the first cause wins), and none is
	// heard after it.
	h.cancel(context.Canceled)
	<-h.done
	if cause := context.Cause(h.ctx); errors.Is(cause, ErrLeaseLost) {
		if le := (*lostError)(nil); errors.As(cause, &le) && le.byClock {
			// The store may still hold it. A refusal (it ran out, or the
			// renewals never took effect) or no answer changes nothing:
			// the lease was lost either way, and is not released again.
			_ = h.release(ctx)
		}
		h.released, h.relErr = true, cause
		return cause
	}
	err := h.release(ctx)
	if st := StatusOf(err); (st != StatusTimeout && st != StatusUnavailable) || CredentialsRefused(err) {
		h.released, h.relErr = true, err
	}
	return err
}

// release sends the release, with ctx's values, bounded by ctx's deadline
// while that is ahead, else by the renewal timeout. Called with relMu held.
func (h *Held) release(ctx context.Context) error {
	deadline := time.Now().Add(h.timeout)
	if d, ok := ctx.Deadline(); ok && time.Until(d) > 0 {
		deadline = d
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if h.relID == "" {
		h.relID = newRequestIDFor(h.store)
	}
	_, err := releaseOn(rctx, h.store, ReleaseRequest{Key: h.req.Key, Owner: h.req.Owner, Token: h.token, RequestID: h.relID})
	return err
}

// nextTick returns when a renewal loop whose renewal was sent at sent
// tries next: an interval later, or now when that has passed.
func nextTick(sent time.Time, every time.Duration) time.Time {
	if next := sent.Add(every); next.After(time.Now()) {
		return next
	}
	return time.Now()
}

// renewLoop renews every interval until the lease is released or lost.
// sent is when the acquire (or the renewal confirming its replay) was
// sent: the first renewal is an interval after it, at once when an acquire
// answered late left less. The lease runs out by the local clock (its
// deadline) TTL after the last successful acquire or renewal was sent,
// and is lost then whatever happens meanwhile: a renewal still in flight
// then (a RenewTimeout longer than the lease has left) does not keep it.
//
// Each renewal carries a request id of its own, made here (a store that
// makes none, such as a bare backend, would otherwise take every renewal
// after the first for a replay of it). A renewal whose outcome is unknown
// (timeout, unavailable) is sent again under the same id, so that the
// store answers what it did; a replayed answer renewed the lease when that
// id was first sent, and the local deadline runs from then.
func (h *Held) renewLoop(sent time.Time, every, timeout time.Duration) {
	deadline := sent.Add(h.req.TTL)
	next := time.NewTimer(time.Until(nextTick(sent, every)))
	defer next.Stop()
	ranOut := func() { h.cancel(lostByClock(errors.New("not renewed before it would run out by the local clock"))) }
	lapse := time.AfterFunc(time.Until(deadline), ranOut)
	defer lapse.Stop()
	// The renewal's request id, kept while its outcome is unknown, and
	// when it was first sent.
	var id string
	var idSent time.Time
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-next.C:
		}
		sent = time.Now()
		if id == "" {
			id, idSent = newRequestIDFor(h.store), sent
		}
		ctx, cancel := context.WithTimeout(h.ctx, timeout)
		res, err := renewOn(ctx, h.store, RenewRequest{Key: h.req.Key, Owner: h.req.Owner, Token: h.token, TTL: h.req.TTL, RequestID: id})
		cancel()
		st := StatusOf(err)
		// A refusal of the credentials, or one until the store restarts,
		// is met again by every retry: the lease is lost at once.
		unknown := (st == StatusTimeout || st == StatusUnavailable) && !CredentialsRefused(err) && !errors.Is(err, ErrRestartRequired)
		if !unknown {
			id = "" // the outcome is known: the next renewal is a new one
		}
		switch {
		case err == nil:
			// Renewed. An answer without the lease (a server's "lease":
			// null) still renewed it: Lease keeps the last copy.
			if res.Lease != nil {
				h.mu.Lock()
				h.lease = *res.Lease
				h.mu.Unlock()
			}
			if res.Replayed {
				// An earlier send of this renewal took effect.
				sent = idSent
			}
			deadline = sent.Add(h.req.TTL)
			if lapse.Stop() {
				lapse.Reset(time.Until(deadline))
			}
		case h.ctx.Err() != nil:
			return
		case unknown:
			// The effect is unknown: keep trying while the lease may still
			// be live. The next try is an interval after this one was
			// sent: at once when this one took the interval or more.
			if !nextTick(sent, every).Before(deadline) {
				h.cancel(lostByClock(fmt.Errorf("no successful renewal before the lease ran out: %w", err)))
				return
			}
		default:
			h.cancel(LeaseLost(err))
			return
		}
		next.Reset(time.Until(nextTick(sent, every)))
	}
}
