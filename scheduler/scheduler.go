package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/protocol"
)

// Scheduler is one worker of a fleet sharing a set of targets (see the
// package doc). Create it with [New] and start it with [Scheduler.Run].
// Its methods are safe for concurrent use; Run may be called once.
//
// The scheduler borrows its store: it never closes it. Close the store
// after Run has returned.
type Scheduler struct {
	store protocol.Store
	// newID makes each change's request id, as the store given to New
	// makes them (protocol.RequestIDFor): a store that makes none, such
	// as a bare backend, would take every change after the first sent
	// under the empty id for a repeat of it.
	newID   func() string
	id      string
	targets Targets
	handler Handler
	set     settings
	log     *slog.Logger
	member  protocol.Key // this worker's membership lease
	started atomic.Bool
	wake    chan struct{} // a handler returned or a lease was lost
	base    context.Context
	// extra holds a place for each extra renewal in flight (see renewOne);
	// its capacity is [Config].ExtraRenewals; nil when that is none.
	extra chan struct{}
	// watches counts the goroutines listening for the store's signal of a
	// lease's end (targets' and memberships'); the shutdown waits for
	// them, so that Run returns only once none calls the store.
	watches sync.WaitGroup
	// renewals counts the renewals under way (see renewOne), those cut
	// short included: the shutdown waits for them too.
	renewals sync.WaitGroup

	// rejoin: the store signalled the end of the membership lease, or it
	// was not renewed before its local deadline; Run looks again at once,
	// to join again. Guarded by mu.
	rejoin bool
	// lapsed is the token of the membership lease the worker gave up by the
	// local clock (0 if none): it may still be live in the store, when only
	// the renewals' answers were lost, and join renews it before acquiring.
	// Guarded by mu.
	lapsed int64

	// stop ends Run's context (not its handlers'): at the store's first
	// answer of status closed, closedBy (see noteClosed). Set by Run
	// before any store call.
	stop context.CancelCauseFunc

	// cappedSignals: the store's subscriptions are capped
	// (protocol.CappedNotifier, an httpapi client): watchBusy leaves them
	// to the watches of leases. Set by New.
	cappedSignals bool

	mu       sync.Mutex
	closedBy error // the store's first answer of status closed; nil while none
	// busyWatches are the busy targets the worker listens to while it is
	// below its fair share, by target (see watchBusy); freed are those
	// heard free since Run last looked.
	busyWatches map[string]*busyWatch
	freed       map[string]bool
	// noSignals: a subscription answered protocol.ErrNoNotifier (the
	// store cannot signal): watchBusy tries no more.
	noSignals  atomic.Bool
	leases     map[string]*lease // by target
	membership *membership       // nil while the worker is not a member
	workers    int
	total      int
	share      int
	lastRound  time.Time
	problem    string
	events     []Event // to pass to the observer, outside mu

	// Owned by Run's goroutine.
	seq       uint64
	backoff   map[string]backoffState
	pending   map[string]string // target -> request id of an acquire whose outcome is unknown
	memberReq string            // the same for the membership lease
	// orphans are the acquires whose answer was lost of keys no longer
	// wanted (targets removed from the set; at shutdown, every one, the
	// membership's too), by key: see resolveOrphans.
	orphans map[protocol.Key]orphan
	// unreleased are leases given up whose release got no answer (or was
	// cut short by the stop): they are released again at the next rounds,
	// or at shutdown, until their local deadline.
	unreleased []*lease
	stopping   bool     // shutting down: a release without an answer is not kept to retry
	current    []string // the target set of the last round
	// others counts the other workers' live membership leases of the last
	// list of the workers' namespace that answered.
	others   int
	haveSet  bool
	problems []string // of the round in progress
	// expiries are the expiries, by the store's clock, of the other
	// workers' leases the round saw (memberships, targets, conflicts):
	// when one runs out, the share may grow or a target come free.
	expiries []time.Time
}

// lease is one target's lease while the scheduler holds it (or gives it
// up). Fields other than those set at creation are guarded by
// Scheduler.mu.
type lease struct {
	target string
	key    protocol.Key
	token  int64
	seq    uint64 // acquisition order
	ctx    context.Context
	cancel context.CancelCauseFunc
	// unwatch stops listening for the store's signal: once the lease is
	// lost or forgotten, not when the handler is cancelled, for a lease
	// given up is held until the handler returned.
	unwatch context.CancelFunc
	done    chan struct{} // closed when the handler returned
	timer   *time.Timer   // loses the lease at deadline

	state                 State
	reason                string
	acquiredAt, expiresAt time.Time
	deadline              time.Time // local: when the last successful acquire or renewal was sent, plus TTL
	release               bool      // release once the handler returned
	releaseID             string    // the request id of a release that got no answer (Run's goroutine)
	returned              bool      // the handler returned (seen by settle)
	gone                  bool      // forgotten: the timer does nothing more
}

type membership struct {
	token     int64
	deadline  time.Time // local: when the last successful acquire or renewal was sent, plus TTL
	expiresAt time.Time
	timer     *time.Timer // gives the membership up at deadline
	// unwatch stops listening for the store's signal of the lease's end;
	// watched is closed once the listening goroutine returned.
	unwatch context.CancelFunc
	watched chan struct{}
}

// orphan is an acquire whose answer was lost, of a key no longer wanted.
type orphan struct {
	reqID string
	// until (local) is when every lease the acquires sent before the
	// orphan was made have run out: resending after it is pointless.
	until time.Time
	// runsOut (local) is when every lease an attempt may have taken has
	// run out, resends included.
	runsOut time.Time
	// unanswered (local) is when a resend last gave no outcome; zero if
	// none did. Resends go least recently unanswered first.
	unanswered time.Time
}

type backoffState struct {
	n     int
	until time.Time
	// delayed: until is when the lock-delay of the target's ended lease
	// ends; each round notes it, so that the worker looks again then.
	delayed bool
	// handedOver: the worker released the target to rebalance, and
	// leaves it to another worker until then.
	handedOver bool
}

// busyWatch is the listening to one busy target's end (see watchBusy).
type busyWatch struct {
	cancel context.CancelFunc
}

// New returns a Scheduler for the worker identity (its owner name in every
// lease it takes; unique in the fleet, e.g. host name and process id) that
// shares targets through store and runs handler on each target it holds.
// cfg may be nil for defaults. New checks its arguments and returns an
// error naming each bad one; it does not touch the store. store may be a
// [*protocol.Runtime] or a backend used directly: every answer is judged
// as a Runtime's ([protocol.Answer]).
func New(store protocol.Store, identity string, targets Targets, handler Handler, cfg *Config) (*Scheduler, error) {
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("store: must not be nil"))
	}
	if err := textfield.Validate("identity", identity, protocol.MaxOwnerLen); err != nil {
		errs = append(errs, err)
	}
	if targets == nil {
		errs = append(errs, errors.New("targets: must not be nil (use Static for a fixed list)"))
	}
	if handler == nil {
		errs = append(errs, errors.New("handler: must not be nil"))
	}
	set, err := cfg.resolve()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("scheduler: new: %w", errors.Join(errs...))
	}
	sched := &Scheduler{
		id: identity, targets: targets, handler: handler, set: set,
		log:         set.log.With("worker", identity, "namespace", set.ns),
		member:      protocol.Key{Namespace: set.workersNS, Name: identity},
		wake:        make(chan struct{}, 1),
		leases:      map[string]*lease{},
		backoff:     map[string]backoffState{},
		busyWatches: map[string]*busyWatch{},
		pending:     map[string]string{},
		orphans:     map[protocol.Key]orphan{},
	}
	if set.extraRenewals > 0 {
		sched.extra = make(chan struct{}, set.extraRenewals)
	}
	sched.newID = func() string { return protocol.RequestIDFor(store) }
	if c, ok := store.(protocol.CappedNotifier); ok && c.SubscriptionsCapped() {
		sched.cappedSignals = true
	}
	sched.store = closeSensor(store, sched.noteClosed)
	return sched, nil
}

// Run works until ctx ends, then shuts down: it cancels every handler
// (cause [ErrStopped]), keeps renewing each lease until its handler
// returned, releases it (and once more each lease given up earlier whose
// release got no answer), resends each acquire whose answer was lost (the
// membership's too) with its request id and releases what it took, until
// the first that gets no answer (as it does each round for a target
// removed from the set, while a lease such an acquire took may live),
// releases the membership lease (also one that ran out by the local clock
// only) and returns nil.
// When ctx ends, every store call of a round under way is cut short (the
// shutdown sends again what needs sending); store operations of the
// shutdown run on a context that keeps ctx's values but not its
// cancellation, each bounded by [Config].OpTimeout, the
// releases of the targets all at once. Run returns
// only after every handler has returned, every watch of a lease's end
// has ended and every renewal it sent has returned (those cut short too:
// a store that ignores a call's context ending holds Run until it
// answers, which the worker warns about after OpTimeout), so that the
// store may be closed then; it returns an error only when it was called
// before, or when the store was closed under it.
//
// A store that answers closed (closed while Run works: close it only
// after Run returned) never answers again: at its first such answer,
// whichever call got it (a lease's watch, when the store signals its
// subscribers as it closes, as the shipped backends do; else the next
// round's), Run cuts the round short, loses every lease (each handler
// cancelled with a cause matching [protocol.ErrLeaseLost] and
// [protocol.ErrClosed], [EventLost]) and the membership
// ([EventMembershipLost]), releases nothing (nothing can be sent: each
// lease runs out after its TTL, which it logs), waits for every handler
// to return and returns an error matching [protocol.ErrClosed].
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: Run may be called only once")
	}
	s.base = context.WithoutCancel(ctx)
	ctx, s.stop = context.WithCancelCause(ctx)
	defer s.stop(nil)
	s.log.Info("scheduler: starting", "workers_namespace", s.set.workersNS, "ttl", s.set.ttl, "renew_every", s.set.every)
	next := time.NewTimer(0)
	defer next.Stop()
	renewAt := time.Now() // when the next full round is due
	for {
		select {
		case <-ctx.Done():
			if why := s.storeClosed(); why != nil {
				return s.closedShutdown(why)
			}
			s.shutdown(next)
			return nil
		case <-s.wake:
			s.settle(ctx)
			s.mu.Lock()
			rejoin, freed := s.rejoin, s.freed
			s.rejoin, s.freed = false, nil
			s.mu.Unlock()
			for t := range freed {
				// The holder let go: a back-off from its conflict no
				// longer holds (a lock-delay's, or the worker's own
				// hand-over's, still does).
				if b := s.backoff[t]; !b.delayed && !b.handedOver {
					delete(s.backoff, t)
				}
			}
			if (rejoin || len(freed) > 0) && ctx.Err() == nil {
				next.Reset(0) // a look, which joins again, or claims what was freed
			}
		case <-next.C:
			began := time.Now()
			// A look due shortly before the next full round becomes that
			// round: renewing a little early costs nothing.
			full := renewAt.Sub(began) <= s.set.every/10
			look := s.round(ctx, full)
			if full {
				// Full rounds start every RenewEvery, however long one
				// took, but never back to back.
				renewAt = latest(began.Add(jitter(s.set.every)), time.Now().Add(s.set.every/10))
			}
			due := renewAt
			if !look.IsZero() && look.Before(due) {
				due = look
			}
			next.Reset(time.Until(due))
		}
		s.flush()
	}
}

// Snapshot returns what the scheduler holds and why, as of now.
func (s *Scheduler) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{
		Worker: s.id, Namespace: s.set.ns, Member: s.membership != nil,
		Workers: s.workers, Targets: s.total, Share: s.share, LastRound: s.lastRound, Problem: s.problem,
	}
	for _, l := range s.leases {
		snap.Owned = append(snap.Owned, Owned{Target: l.target, Token: l.token, State: l.state, Reason: l.reason,
			AcquiredAt: l.acquiredAt, ExpiresAt: l.expiresAt})
	}
	slices.SortFunc(snap.Owned, func(a, b Owned) int { return strings.Compare(a.Target, b.Target) })
	return snap
}

// round renews everything (when renew is set: a full round), then looks at
// the workers and the targets and rebalances. ctx is Run's: once it ends
// the round's calls are cut short and it stops, leaving to the shutdown
// the releases without an answer and the acquires of unknown outcome, so
// that a store that does not answer does not hold the shutdown up. It
// returns when to look again because a lease of another worker that the
// round saw runs out (see [nextLook]), or zero.
func (s *Scheduler) round(ctx context.Context, renew bool) time.Time {
	began := time.Now()
	s.problems = s.problems[:0]
	s.expiries = s.expiries[:0]
	if renew {
		s.renewAll(ctx)
	}
	// Every call of a round is cut short when ctx ends: the shutdown
	// sends again what needs it.
	s.settle(ctx)
	if ctx.Err() != nil {
		return time.Time{} // the shutdown tries the unanswered releases
	}
	s.retryReleases(ctx)
	s.resolveOrphans(ctx)
	if ctx.Err() != nil {
		return time.Time{} // nor send what was never sent
	}
	s.refreshTargets(ctx)
	// A worker joins once it has a target set: a member the others count
	// but that claims nothing would hold them to a share that leaves
	// targets unworked.
	if s.haveSet {
		s.join(ctx)
	}
	workers := s.countWorkers(ctx)
	holders, listed := s.listHolders(ctx)
	if ctx.Err() != nil {
		return time.Time{}
	}

	s.mu.Lock()
	s.workers, s.total = workers, len(s.current)
	// A worker that knows of no live worker (not a member itself) shares
	// with nobody.
	s.share = (s.total + max(workers, 1) - 1) / max(workers, 1)
	s.mu.Unlock()
	if s.haveSet {
		s.giveUp()
		s.settle(ctx)
		if listed && ctx.Err() == nil {
			s.claim(ctx, holders, began.Add(s.set.every))
			s.watchBusy(holders)
		}
	}

	s.mu.Lock()
	s.lastRound = time.Now()
	s.problem = strings.Join(s.problems, "; ")
	s.events = append(s.events, s.eventLocked(EventRound, nil, nil))
	s.mu.Unlock()
	return nextLook(s.expiries, time.Now(), s.set.every/10)
}

// expiryMargin is how long after a lease's expiry (by the local clock) a
// worker looks again: the store must judge it expired by then.
const expiryMargin = 2 * time.Millisecond

// nextLook returns when to look again for leases of other workers that run
// out: at the earliest of expiries still ahead of now, or, so that leases
// running out together cost one look, at the last of those within group
// after it; plus [expiryMargin]. Zero when none is ahead.
//
// A dead worker's targets are thus taken over as its leases run out, not
// at the next round: within TTL of its last renewal, plus group and the
// claim. Expiries are by the store's clock and compared with the local
// one; a lease still live past its expiry by the local clock (the store's
// clock is behind) is left to the next full round, so that the worker
// never spins on it.
func nextLook(expiries []time.Time, now time.Time, group time.Duration) time.Time {
	var first time.Time
	for _, e := range expiries {
		if e.After(now) && (first.IsZero() || e.Before(first)) {
			first = e
		}
	}
	if first.IsZero() {
		return first
	}
	last := first
	for _, e := range expiries {
		if e.After(last) && !e.After(first.Add(group)) {
			last = e
		}
	}
	return last.Add(expiryMargin)
}

// renewItem and renewOutcome are one lease of a renewal round.
type renewItem struct {
	key      protocol.Key
	token    int64
	deadline time.Time // give up on the renewal then: the lease is lost by the local clock anyway
}

type renewOutcome struct {
	sent time.Time
	res  protocol.Result
	err  error
}

// renewConcurrency bounds the leases of a round being renewed at once
// (each with up to maxRenewAttempts renewals in flight, the extra ones
// within the worker's budget, see renewOne). A
// backend that coalesces concurrent operations (PostgreSQL's, by default)
// then sends most of a round's renewals in a few round trips
// (BenchmarkRenewRound in sqlstore/postgres); SQLite queues them for its
// one writer.
const renewConcurrency = 64

// renew renews items, up to renewConcurrency at a time, the first items
// first, each bounded by its deadline and ctx (see renewOne), and calls
// onAnswer(i, out) as soon as item i's renewal has its outcome, while the
// round's other renewals may still wait. It is the one place to change
// should the protocol offer a bulk renew.
func (s *Scheduler) renew(ctx context.Context, items []renewItem, onAnswer func(i int, out renewOutcome)) []renewOutcome {
	out := make([]renewOutcome, len(items))
	concurrently(len(items), func(i int) {
		out[i] = s.renewOne(ctx, items[i])
		onAnswer(i, out[i])
	})
	return out
}

// renewOne renews it, bounded by its deadline and ctx. A renewal without
// an answer after OpTimeout is left waiting (a slow store's late answer
// still keeps the lease) and another is sent beside it, every OpTimeout
// while one waits, each taking a place of the worker's budget of extra
// renewals in flight ([Config].ExtraRenewals; when it is spent, as soon as
// a place comes free): a renewal hung on a broken connection (an etcd
// member whose leader was killed) does not take the lease, nor the round,
// with it, and a store that answers every renewal a little late gets one
// renewal per lease and the budget, not several per lease. It returns the
// first success or refusal, with when that renewal was sent, else the
// last answer once none waits; the renewals still waiting then are cut
// short, and Run waits for them before it returns (waitRenewals).
func (s *Scheduler) renewOne(ctx context.Context, it renewItem) renewOutcome {
	ctx, cancel := context.WithDeadline(ctx, it.deadline)
	defer cancel()
	// Renewals still waiting when renewOne returns are cut short and
	// leave their answers here.
	answers := make(chan renewOutcome, maxRenewAttempts)
	waiting := 0
	// Every send is the same renewal, under one request id: the store
	// applies the first that reaches it and answers the others as its
	// replay, which renewed the lease no earlier than the first send.
	req := protocol.RenewRequest{Key: it.key, Owner: s.id, Token: it.token, TTL: s.set.ttl, RequestID: s.newID()}
	first := time.Now()
	send := func(extra bool) {
		waiting++
		s.renewals.Go(func() {
			o := renewOutcome{sent: time.Now()}
			o.res, o.err = s.store.Renew(ctx, req)
			if o.err == nil && o.res.Replayed {
				o.sent = first
			}
			if extra {
				<-s.extra // its place in the budget, held until the store answered
			}
			answers <- o
		})
	}
	send(false)
	again := time.NewTimer(s.set.opTimeout)
	defer again.Stop()
	var budget chan<- struct{} // s.extra while an extra renewal is due, else nil
	var last renewOutcome
	for waiting > 0 {
		select {
		case o := <-answers:
			waiting--
			if !unknown(o.err) {
				return o
			}
			last = o
		case <-again.C:
			if ctx.Err() == nil && waiting < maxRenewAttempts && s.extra != nil {
				budget = s.extra // the timer waits until it is sent
			} else {
				again.Reset(s.set.opTimeout)
			}
		case budget <- struct{}{}:
			budget = nil
			if ctx.Err() != nil {
				<-s.extra
				continue
			}
			send(true)
			again.Reset(s.set.opTimeout)
		}
	}
	return last
}

// maxRenewAttempts bounds the renewals of one lease in flight at once
// (see renewOne).
const maxRenewAttempts = 4

// concurrently calls f(0) to f(n-1), up to renewConcurrency at a time, the
// first first, and returns when every call returned.
func concurrently(n int, f func(i int)) {
	sem := make(chan struct{}, renewConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// refused reports whether err is the store's definite refusal of a
// renewal or release: the lease is not (or no longer) the caller's.
func refused(err error) bool {
	switch protocol.StatusOf(err) {
	case protocol.StatusNotFound, protocol.StatusStaleToken, protocol.StatusNotOwner, protocol.StatusExpired:
		return true
	}
	return false
}

// renewAll renews every lease held, membership included, the leases
// closest to their local deadline first, and applies each outcome when
// its answer arrives, not when the round's slowest renewal returned: a
// refusal loses the lease, the handler is cancelled and the observer
// hears [EventLost] then (TestRefusedRenewalIsNotHeldUpByASlowRenewal,
// TestRefusedRenewalIsObservedAtOnce); a success moves the lease's local
// deadline then, so that a renewal stuck past the leases' previous
// deadline costs only its own lease
// (TestRenewedLeaseIsKeptWhileAnotherRenewalOfTheRoundIsStuck); an
// unknown outcome leaves it to the lease's local deadline. A renewal is given OpTimeout, or longer while its
// lease's local deadline is further away: on a slow store a late renewal
// still keeps the lease, and past the deadline it is lost anyway; one
// without an answer after OpTimeout gets another beside it (renewOne). When ctx
// ends the renewals under way are given up, their outcomes unknown.
func (s *Scheduler) renewAll(ctx context.Context) {
	s.mu.Lock()
	var items []renewItem
	var held []*lease
	for _, l := range s.leases {
		if l.state != StateLost {
			held = append(held, l)
		}
	}
	slices.SortFunc(held, func(a, b *lease) int { return a.deadline.Compare(b.deadline) })
	least := time.Now().Add(s.set.opTimeout)
	m := s.membership
	if m != nil {
		items = append(items, renewItem{key: s.member, token: m.token, deadline: latest(m.deadline, least)})
	}
	for _, l := range held {
		items = append(items, renewItem{key: l.key, token: l.token, deadline: latest(l.deadline, least)})
	}
	s.mu.Unlock()
	if len(items) == 0 {
		return
	}
	leaseOf := func(i int) *lease { // nil for the membership
		switch {
		case m == nil:
			return held[i]
		case i > 0:
			return held[i-1]
		}
		return nil
	}
	outs := s.renew(ctx, items, func(i int, out renewOutcome) {
		switch {
		case out.err == nil:
			// Renewed. An answer without the lease (a served store's
			// "lease": null) still renewed it: the expiry shown stays
			// the last one the store gave.
			s.mu.Lock()
			if l := leaseOf(i); l != nil {
				if out.sent.Add(s.set.ttl).After(l.deadline) {
					l.deadline = out.sent.Add(s.set.ttl)
				}
				if out.res.Lease != nil {
					l.expiresAt = out.res.Lease.ExpiresAt
				}
			} else if s.membership == m {
				m.deadline = out.sent.Add(s.set.ttl)
				if out.res.Lease != nil {
					m.expiresAt = out.res.Lease.ExpiresAt
				}
			}
			s.mu.Unlock()
		case refused(out.err) || final(out.err): // a renewal refused for its credentials, or until the store restarts, too: no retry mends it
			s.mu.Lock()
			if l := leaseOf(i); l != nil {
				s.loseLocked(l, out.err, false)
			} else if s.membership == m {
				s.log.Warn("scheduler: membership lease lost; joining again", "err", out.err)
				s.loseMembershipLocked(m, out.err)
			}
			s.mu.Unlock()
			s.flush() // the observer hears of the loss with the handler (or the membership), not at the round's end
		}
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	unknown := 0
	var firstErr error
	for _, out := range outs {
		if out.err != nil && !refused(out.err) && !final(out.err) { // successes and refusals were applied when they came
			unknown++
			if firstErr == nil {
				firstErr = out.err
			}
		}
	}
	if unknown > 0 && ctx.Err() == nil {
		s.log.Warn("scheduler: renewals without an answer; leases are kept until they would run out", "count", unknown, "err", firstErr)
		s.problems = append(s.problems, fmt.Sprintf("%d renewals without an answer: %v", unknown, firstErr))
	}
	s.log.Debug("scheduler: renewed", "leases", len(items)-unknown)
}

// loseLocked marks l lost and cancels its handler. release says whether to
// release the lease once the handler returned (it may still be the
// worker's: lost by the local clock). Called with s.mu held.
func (s *Scheduler) loseLocked(l *lease, why error, release bool) {
	if l.state == StateLost || l.gone {
		return
	}
	was := l.state
	cause := protocol.LeaseLost(why)
	l.state, l.reason = StateLost, "lost: "+why.Error()
	l.release = release
	l.cancel(cause)
	l.unwatch()
	s.log.Warn("scheduler: lease lost", "target", l.target, "token", l.token, "was", was, "err", why)
	s.events = append(s.events, s.eventLocked(EventLost, l, cause))
	s.poke()
}

// onDeadline runs on l's timer: the lease is lost when it was not renewed
// before its local deadline, whether or not the store answers.
func (s *Scheduler) onDeadline(l *lease) {
	s.mu.Lock()
	if l.gone || l.state == StateLost {
		s.mu.Unlock()
		return
	}
	if d := time.Until(l.deadline); d > 0 {
		l.timer.Reset(d)
		s.mu.Unlock()
		return
	}
	s.loseLocked(l, errors.New("not renewed before it would run out by the local clock"), true)
	s.mu.Unlock()
	s.flush()
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// settle notes handlers that returned and forgets or releases the leases
// whose handlers ended after they were given up or lost.
func (s *Scheduler) settle(ctx context.Context) {
	var release []*lease
	s.mu.Lock()
	for t, l := range s.leases {
		if !l.returned {
			select {
			case <-l.done:
				l.returned = true
			default:
				continue
			}
			if l.state == StateRunning {
				l.state, l.reason = StateIdle, "the handler returned; the lease is kept until it is handed over"
				s.log.Info("scheduler: handler returned; target kept", "target", t, "token", l.token)
			}
		}
		if l.state == StateRunning || l.state == StateIdle {
			continue
		}
		l.gone = true
		l.timer.Stop()
		l.unwatch()
		delete(s.leases, t)
		if l.state != StateLost || l.release {
			release = append(release, l)
		}
	}
	s.mu.Unlock()
	s.releaseLeases(ctx, release)
}

// releaseLeases releases leases whose handlers returned, up to
// renewConcurrency at a time, each bounded by OpTimeout and cut short when
// ctx ends: a store that does not answer holds a shutdown up for one
// OpTimeout, not one per lease.
func (s *Scheduler) releaseLeases(ctx context.Context, ls []*lease) {
	s.sendReleases(ctx, ls)()
}

// sendReleases starts releasing ls as releaseLeases does and returns at
// once; the function it returns waits for the answers and applies them
// (on Run's goroutine).
func (s *Scheduler) sendReleases(ctx context.Context, ls []*lease) (apply func()) {
	errs := make([]error, len(ls))
	ids := make([]string, len(ls))
	done := make(chan struct{})
	go func() {
		defer close(done)
		concurrently(len(ls), func(i int) {
			ctx, cancel := context.WithTimeout(ctx, s.set.opTimeout)
			defer cancel()
			ids[i] = ls[i].releaseID
			if ids[i] == "" {
				ids[i] = s.newID()
			}
			_, errs[i] = s.store.Release(ctx, protocol.ReleaseRequest{Key: ls[i].key, Owner: s.id, Token: ls[i].token, RequestID: ids[i]})
		})
	}()
	return func() {
		<-done
		for i, l := range ls {
			if ids[i] != "" {
				l.releaseID = ids[i]
			}
			s.released(l, errs[i])
		}
	}
}

// retryReleases releases again the leases whose release got no answer.
func (s *Scheduler) retryReleases(ctx context.Context) {
	s.releaseLeases(ctx, s.takeUnreleased())
}

// takeUnreleased returns the leases whose release got no answer and whose
// local deadline has not passed (after it they ran out: it logs those),
// and empties the list.
func (s *Scheduler) takeUnreleased() []*lease {
	var due []*lease
	for _, l := range s.unreleased {
		if time.Now().Before(l.deadline) {
			due = append(due, l)
			continue
		}
		s.log.Info("scheduler: stopped trying to release: the lease has run out by the local clock",
			"target", l.target, "token", l.token)
	}
	s.unreleased = nil
	return due
}

// released applies the outcome err of l's release. A handed-over target is
// not claimed again for a round, so that another worker takes it.
func (s *Scheduler) released(l *lease, err error) {
	if l.state == StateHandingOver {
		b := s.backoff[l.target]
		b.until, b.delayed, b.handedOver = time.Now().Add(jitter(s.set.every)), false, true
		s.backoff[l.target] = b
	}
	switch {
	case err == nil:
		s.log.Info("scheduler: released", "target", l.target, "token", l.token, "after", l.state)
		s.mu.Lock()
		s.events = append(s.events, s.eventLocked(EventReleased, l, nil))
		s.mu.Unlock()
	case refused(err):
		s.log.Debug("scheduler: release: the lease was already gone", "target", l.target, "token", l.token, "err", err)
	case unknown(err) && !s.stopping && time.Now().Before(l.deadline):
		// Left to run out, the lease would keep the target from every
		// worker until then, and for its lock-delay after.
		s.unreleased = append(s.unreleased, l)
		if errors.Is(err, context.Canceled) { // Run's context ended: no fault of the store
			s.log.Info("scheduler: release cut short by the stop; the shutdown sends it again", "target", l.target, "token", l.token)
			return
		}
		s.log.Warn("scheduler: release got no answer; trying again next round or at shutdown", "target", l.target, "token", l.token, "err", err)
	default:
		s.log.Warn("scheduler: release failed; the lease will expire", "target", l.target, "token", l.token, "err", err)
	}
}

// join takes (or confirms) the membership lease when the worker is not a
// member, or its membership ran out by the local clock (its timer gives it
// up then; a round that comes first does it here). A membership that
// ran out by the local clock may still be live in the store (the renewals'
// answers were lost): join renews it with its token first, and acquires
// only when the store refuses that renew, for an acquire would conflict
// with the worker's own lease until it expired. Each call is bounded by
// OpTimeout and cut short when ctx ends.
func (s *Scheduler) join(parent context.Context) {
	s.mu.Lock()
	m := s.membership
	if m != nil && time.Now().After(m.deadline) { // its timer has not fired yet
		s.lapseLocked(m)
		m = nil
	}
	lapsed := s.lapsed
	s.mu.Unlock()
	if m != nil {
		return
	}
	s.flush() // a lapse heard here, before the join's calls
	ctx, cancel := context.WithTimeout(parent, s.set.opTimeout)
	defer cancel()
	if lapsed != 0 {
		sent := time.Now()
		res, err := s.store.Renew(ctx, protocol.RenewRequest{Key: s.member, Owner: s.id, Token: lapsed, TTL: s.set.ttl, RequestID: s.newID()})
		switch {
		case err == nil:
			// Renewed; an answer without the lease (a served store's
			// "lease": null) too: the lease is the lapsed token's.
			l := protocol.Lease{Key: s.member, Owner: s.id, Token: lapsed}
			if res.Lease != nil {
				l = *res.Lease
			}
			s.mu.Lock()
			s.lapsed = 0
			s.joinedLocked(l, sent)
			s.mu.Unlock()
			s.log.Info("scheduler: joined again with the membership lease still held", "token", l.Token)
			return
		case err != nil && parent.Err() != nil:
			return // cut short by the stop: the shutdown releases the lapsed token
		case refused(err):
			s.log.Info("scheduler: the lapsed membership lease is gone; acquiring", "token", lapsed, "err", err)
			s.mu.Lock()
			s.lapsed = 0
			s.mu.Unlock()
		default:
			s.problems = append(s.problems, "join: renew the lapsed membership: "+err.Error())
			s.log.Warn("scheduler: renew of the lapsed membership failed", "token", lapsed, "err", err)
			return
		}
	}
	lease, sent, err := s.acquire(ctx, s.member, s.memberReq)
	var perr *protocol.Error
	switch {
	case err != nil && parent.Err() != nil:
		// Cut short by the stop: the shutdown resolves it.
	case err == nil:
		s.memberReq = ""
		s.mu.Lock()
		s.joinedLocked(lease, sent)
		s.mu.Unlock()
		s.log.Info("scheduler: joined", "token", lease.Token)
	case errors.As(err, &perr) && perr.KeptByLockDelay():
		// The store's namespace default gave the membership a lock-delay,
		// and the lease ended other than by a release.
		s.memberReq = ""
		free := perr.Lease.FreeAt()
		s.expiries = append(s.expiries, free)
		s.problems = append(s.problems, fmt.Sprintf("identity %s is kept by the lock-delay of its ended membership lease (token %d) until %s: waiting for it to end",
			s.id, perr.Lease.Token, free.UTC().Format(time.RFC3339Nano)))
		s.log.Warn("scheduler: a lock-delay keeps this identity; waiting", "token", perr.Lease.Token, "until", free)
	case errors.Is(err, protocol.ErrConflict) && errors.As(err, &perr) && perr.Lease != nil:
		s.memberReq = ""
		s.expiries = append(s.expiries, perr.Lease.ExpiresAt)
		s.problems = append(s.problems, fmt.Sprintf("identity %s is held by another worker (token %d) until %s: waiting for it to end",
			s.id, perr.Lease.Token, perr.Lease.ExpiresAt.UTC().Format(time.RFC3339Nano)))
		s.log.Warn("scheduler: another worker holds this identity; waiting", "token", perr.Lease.Token, "until", perr.Lease.ExpiresAt)
	default:
		s.problems = append(s.problems, "join: "+err.Error())
		s.log.Warn("scheduler: join failed", "err", err)
	}
}

// joinedLocked records the membership lease l, taken (or renewed) by a
// call sent at sent, and listens for the store's signal of its end: a
// revoke (an operator's) or a release elsewhere is heard at once, as for
// a target lease, the renewals being the fallback. The worker then no
// longer counts itself a member, and Run looks again at once to join
// again. So too when the lease is not renewed before its local deadline
// (see onMemberDeadline). Called with s.mu held.
func (s *Scheduler) joinedLocked(l protocol.Lease, sent time.Time) {
	s.dropMembershipLocked()
	ctx, unwatch := context.WithCancel(s.base)
	m := &membership{token: l.Token, deadline: sent.Add(s.set.ttl), expiresAt: l.ExpiresAt, unwatch: unwatch, watched: make(chan struct{})}
	m.timer = time.AfterFunc(time.Until(m.deadline), func() { s.onMemberDeadline(m) })
	s.membership = m
	s.watches.Go(func() {
		defer close(m.watched)
		protocol.WatchLease(ctx, s.store, l, s.set.opTimeout, func(why error) {
			if closedStore(why) {
				return
			}
			s.mu.Lock()
			if s.membership != m {
				s.mu.Unlock()
				return
			}
			s.log.Warn("scheduler: membership lease lost; joining again", "token", m.token, "err", why)
			s.loseMembershipLocked(m, why)
			s.rejoin = true
			s.poke()
			s.mu.Unlock()
			s.flush()
		})
	})
}

// onMemberDeadline runs on m's timer: a membership lease not renewed
// before its local deadline may have run out in the store, where the
// other workers no longer count this one, whether or not the store
// answers. The worker gives it up as it loses a target lease then: it no
// longer counts itself a member nor claims targets, and Run looks again at
// once to join again (renewing the lapsed lease first: only its answers
// may have been lost).
func (s *Scheduler) onMemberDeadline(m *membership) {
	s.mu.Lock()
	if s.membership != m {
		s.mu.Unlock()
		return
	}
	if d := time.Until(m.deadline); d > 0 {
		m.timer.Reset(d)
		s.mu.Unlock()
		return
	}
	s.lapseLocked(m)
	s.rejoin = true
	s.poke()
	s.mu.Unlock()
	s.flush()
}

// lapseLocked gives up the membership lease m, the current one, by the
// local clock: it may still be live in the store (see join). Called with
// s.mu held.
func (s *Scheduler) lapseLocked(m *membership) {
	s.log.Warn("scheduler: membership lease not renewed before it would run out by the local clock; no longer a member, joining again",
		"token", m.token)
	s.lapsed = m.token
	s.loseMembershipLocked(m, errors.New("not renewed before it would run out by the local clock"))
}

// loseMembershipLocked forgets m, the current membership lease, lost
// for why, and queues [EventMembershipLost] (flush passes it on). Called
// with s.mu held.
func (s *Scheduler) loseMembershipLocked(m *membership, why error) {
	s.dropMembershipLocked()
	ev := s.eventLocked(EventMembershipLost, nil, protocol.LeaseLost(why))
	ev.Token = m.token
	s.events = append(s.events, ev)
}

// dropMembershipLocked forgets the membership lease, if any, and stops
// listening for its end and its local deadline. Called with s.mu held.
func (s *Scheduler) dropMembershipLocked() {
	if s.membership != nil {
		s.membership.timer.Stop()
		s.membership.unwatch()
		s.membership = nil
	}
}

// errReplayEnded marks the store's refusal of the renew confirming a
// replayed acquire: the lease that acquire took has ended (revoked,
// released or run out), and the key may be free for an acquire with a new
// request id.
var errReplayEnded = errors.New("the lease it took has ended")

// acquire takes key, retrying with reqID when an earlier attempt's outcome
// is unknown, and confirms a replayed acquire with a renew (a replay is
// history, not proof of holding now). It returns the lease, when the
// acquire (or the confirming renew) was sent, and the error. On an unknown
// outcome the error's status is timeout or unavailable and acquire keeps
// the request id to retry with (s.pending, or s.memberReq for the
// membership); otherwise it drops it. When the store refuses the
// confirming renew, the error wraps errReplayEnded as well as the refusal.
func (s *Scheduler) acquire(ctx context.Context, key protocol.Key, reqID string) (protocol.Lease, time.Time, error) {
	if reqID == "" {
		reqID = s.newID()
	}
	sent := time.Now()
	res, err := s.store.Acquire(ctx, s.acquireRequest(key, reqID))
	if closedAnswer(err) {
		return protocol.Lease{}, sent, err // not sent: an earlier attempt's id stays
	}
	if unknown(err) {
		if key == s.member {
			s.memberReq = reqID
		} else {
			s.pending[key.Name] = reqID
		}
		return protocol.Lease{}, sent, err
	}
	if key == s.member {
		s.memberReq = ""
	} else {
		delete(s.pending, key.Name)
	}
	if err != nil {
		return protocol.Lease{}, sent, err
	}
	if res.Lease == nil {
		return protocol.Lease{}, sent, fmt.Errorf("scheduler: acquire of %s answered %s without a lease", key, res.Status)
	}
	if !res.Replayed {
		return *res.Lease, sent, nil
	}
	sent = time.Now()
	rr, err := s.store.Renew(ctx, protocol.RenewRequest{Key: key, Owner: s.id, Token: res.Lease.Token, TTL: s.set.ttl, RequestID: s.newID()})
	if noOutcome(err) { // the replay stands; confirm it next time
		if key == s.member {
			s.memberReq = reqID
		} else {
			s.pending[key.Name] = reqID
		}
	}
	if refused(err) { // the lease the replay took has ended
		return protocol.Lease{}, sent, fmt.Errorf("scheduler: confirm replayed acquire of %s (token %d): %w, acquire with a new request id: %w",
			key, res.Lease.Token, errReplayEnded, err)
	}
	if err != nil {
		return protocol.Lease{}, sent, fmt.Errorf("scheduler: confirm replayed acquire of %s (token %d): %w", key, res.Lease.Token, err)
	}
	if rr.Lease == nil {
		// Renewed without a copy of the lease in the answer (a served
		// store's "lease": null): confirmed all the same.
		return *res.Lease, sent, nil
	}
	return *rr.Lease, sent, nil
}

// acquireRequest is the acquire of key (a target's or the membership's)
// with request id reqID: a resend must be the same request.
func (s *Scheduler) acquireRequest(key protocol.Key, reqID string) protocol.AcquireRequest {
	req := protocol.AcquireRequest{Key: key, Owner: s.id, TTL: s.set.ttl, RequestID: reqID}
	if key != s.member {
		req.LockDelay = s.set.lockDelay
	}
	return req
}

// final reports whether err, an unavailable one, is met again by every
// retry, so that a renewal failing with it loses the lease at once, as
// [protocol.Hold] takes it: a refusal of the credentials or their
// permission (protocol.CredentialsRefused), or of a store that refuses
// every operation until its process restarts (protocol.ErrRestartRequired).
func final(err error) bool {
	return protocol.CredentialsRefused(err) || errors.Is(err, protocol.ErrRestartRequired)
}

// unknown reports whether err leaves the outcome of a change unknown. A
// refusal of the credentials or their permission (protocol.CredentialsRefused) is
// not: the store applied nothing.
func unknown(err error) bool {
	if protocol.CredentialsRefused(err) {
		return false
	}
	switch protocol.StatusOf(err) {
	case protocol.StatusTimeout, protocol.StatusUnavailable:
		return true
	}
	return false
}

// noOutcome reports whether err tells nothing of a change: its outcome is
// unknown, or the store was closed and did not judge it.
func noOutcome(err error) bool {
	return unknown(err) || closedAnswer(err)
}

// closedAnswer reports whether err is the store's answer closed: the
// call was not sent. It reads err's own status, not its chain: a timeout
// whose context's cause matches [protocol.ErrClosed] (the stop at the
// store's close, or a Held of another store that was closed) left its
// call's outcome unknown, and errors.Is would take it for closed.
func closedAnswer(err error) bool {
	return protocol.StatusOf(err) == protocol.StatusClosed
}

// listAll returns the live leases of a namespace, every page.
func (s *Scheduler) listAll(ctx context.Context, ns string) ([]protocol.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, s.set.opTimeout)
	defer cancel()
	var out []protocol.Lease
	cursor := ""
	for {
		res, err := s.store.List(ctx, protocol.ListRequest{Namespace: ns, Limit: protocol.MaxListLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Leases...)
		if res.NextCursor == "" {
			return out, nil
		}
		cursor = res.NextCursor
	}
}

// countWorkers returns the live workers the worker knows of: the live
// membership leases of the workers' namespace (every one listed, that
// under its own name too, which the other workers count), and this worker
// while it is a member. When the store does not answer, the other workers
// of the last list that answered, and this one only while it is a member.
func (s *Scheduler) countWorkers(ctx context.Context) int {
	s.mu.Lock()
	self := 0
	if s.membership != nil {
		self = 1
	}
	s.mu.Unlock()
	leases, err := s.listAll(ctx, s.set.workersNS)
	if err != nil && ctx.Err() != nil {
		return s.others + self
	}
	if err != nil {
		s.problems = append(s.problems, "list workers: "+err.Error())
		s.log.Warn("scheduler: list workers failed; counting the other workers of the last list", "err", err)
		return s.others + self
	}
	s.others = 0
	for _, l := range leases {
		if l.Key.Name == s.id {
			self = 1
		} else {
			s.others++
			s.expiries = append(s.expiries, l.ExpiresAt)
		}
	}
	return s.others + self
}

// refreshTargets calls the targets function; on error it keeps the last set.
func (s *Scheduler) refreshTargets(ctx context.Context) {
	tctx, cancel := context.WithTimeout(ctx, s.set.opTimeout)
	defer cancel()
	list, err := s.targets(tctx)
	if err != nil && ctx.Err() != nil {
		return // shutting down
	}
	if err != nil && !s.haveSet {
		s.problems = append(s.problems, "targets: "+err.Error()+" (no target set yet: not joining until the targets function answers)")
		s.log.Warn("scheduler: the targets function failed; no target set yet, not joining until it answers", "err", err)
		return
	}
	if err != nil {
		s.problems = append(s.problems, "targets: "+err.Error())
		s.log.Warn("scheduler: the targets function failed; keeping the last set", "err", err)
		return
	}
	seen := make(map[string]bool, len(list))
	cur := make([]string, 0, len(list))
	bad := 0
	for _, t := range list {
		if seen[t] {
			continue
		}
		seen[t] = true
		if err := (protocol.Key{Namespace: s.set.ns, Name: t}).Validate(); err != nil {
			if bad == 0 {
				s.log.Warn("scheduler: target left out: not a valid lease name", "target", t, "err", err)
			}
			bad++
			continue
		}
		cur = append(cur, t)
	}
	if bad > 0 {
		s.problems = append(s.problems, fmt.Sprintf("%d targets left out: not valid lease names", bad))
	}
	s.current, s.haveSet = cur, true
	for t := range s.backoff {
		if !seen[t] {
			delete(s.backoff, t)
		}
	}
	for t, id := range s.pending {
		if !seen[t] {
			s.orphan(protocol.Key{Namespace: s.set.ns, Name: t}, id)
			delete(s.pending, t)
		}
	}
	for key, o := range s.orphans {
		if key.Namespace == s.set.ns && seen[key.Name] { // wanted again: claim resolves it as before
			s.pending[key.Name] = o.reqID
			delete(s.orphans, key)
		}
	}
}

// orphan notes that the acquire of key with request id reqID, whose
// answer was lost, is no longer wanted.
func (s *Scheduler) orphan(key protocol.Key, reqID string) {
	end := time.Now().Add(s.set.ttl)
	s.orphans[key] = orphan{reqID: reqID, until: end, runsOut: end}
}

// resolveOrphans learns the outcome of the acquires whose answer was lost
// of keys no longer wanted: each is sent again with its request id, and a
// lease it took (then, or on this retry) is released, so that it does not
// keep the key from every worker until it runs out (and for its lock-delay
// after). An orphan is dropped once any lease the acquires sent before it
// was made took has run out (TTL after), without a resend; a lease a
// resend may have taken (a refused acquire is not recorded, so its resend
// runs again) lives longer, and is warned about. A round stops at the
// first resend or release that gets no answer, so that a store that does
// not answer costs it one OpTimeout, not one per orphan; the rest wait for
// the next round, which resends the least recently unanswered first (one
// silent key does not hold up the others). At shutdown that one and the
// rest are logged, and their leases, if any, run out.
func (s *Scheduler) resolveOrphans(ctx context.Context) {
	keys := slices.Collect(maps.Keys(s.orphans))
	slices.SortFunc(keys, func(a, b protocol.Key) int {
		return cmp.Or(s.orphans[a].unanswered.Compare(s.orphans[b].unanswered),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, key := range keys {
		o := s.orphans[key]
		if now := time.Now(); now.After(o.until) {
			if now.Before(o.runsOut) {
				s.log.Warn("scheduler: stopped resending an acquire whose answer was lost: a lease a resend without an answer may have taken was not released; it runs out by its TTL",
					"key", key, "request_id", o.reqID, "runs_out", o.runsOut)
			} else {
				s.log.Info("scheduler: stopped resending an acquire whose answer was lost: any lease it took has run out",
					"key", key, "request_id", o.reqID)
			}
			delete(s.orphans, key)
			continue
		}
		step, token, err := s.resolveOrphan(ctx, key, &o)
		if err == nil {
			delete(s.orphans, key)
			continue
		}
		o.unanswered = time.Now()
		s.orphans[key] = o
		if !s.stopping {
			s.problems = append(s.problems, fmt.Sprintf("resolve a lost acquire of %s: %s: %v", key, step, err))
			return // the others next round
		}
		for k, o := range s.orphans {
			if k == key {
				s.log.Warn("scheduler: a lease an acquire whose answer was lost may have taken was not released: the store gave no outcome; it runs out by its TTL",
					"key", k, "request_id", o.reqID, "unanswered", step, "token", token, "runs_out", o.runsOut, "err", err)
			} else {
				s.log.Warn("scheduler: a lease an acquire whose answer was lost may have taken was not released: not tried, the store gave no outcome for another; it runs out by its TTL",
					"key", k, "request_id", o.reqID, "runs_out", o.runsOut)
			}
		}
		clear(s.orphans)
		return
	}
}

// resolveOrphan sends o's acquire again and releases what it took. It
// returns the step that got no answer or was not judged ("acquire" or
// "release", with the lease's token), or a nil error when the outcome is
// known: refused (conflict), or released (or gone already). o.runsOut
// moves with a resend that took the key anew, or may have (no answer).
func (s *Scheduler) resolveOrphan(ctx context.Context, key protocol.Key, o *orphan) (step string, token int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.set.opTimeout)
	defer cancel()
	res, err := s.store.Acquire(ctx, s.acquireRequest(key, o.reqID))
	switch {
	case unknown(err):
		// Taken, if at all, before now.
		o.runsOut = latest(o.runsOut, time.Now().Add(s.set.ttl))
		return "acquire", 0, err
	case errors.Is(err, protocol.ErrConflict):
		return "", 0, nil // refused: the earlier attempts took nothing that lives
	case err != nil:
		return "acquire", 0, err // not judged (closed, invalid): nothing learned
	case res.Lease == nil:
		return "acquire", 0, fmt.Errorf("scheduler: acquire of %s answered %s without a lease", key, res.Status)
	}
	if !res.Replayed { // taken anew by this resend, before now
		o.runsOut = latest(o.runsOut, time.Now().Add(s.set.ttl))
	}
	token = res.Lease.Token
	_, err = s.store.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: s.id, Token: token, RequestID: s.newID()})
	switch {
	case err == nil:
		s.log.Info("scheduler: released the lease an acquire whose answer was lost took, its key no longer wanted",
			"key", key, "token", token)
	case !refused(err): // no answer, or not judged
		return "release", token, err
	}
	return "", 0, nil // released, or gone already
}

// listHolders returns the live leases of the targets' namespace by name.
func (s *Scheduler) listHolders(ctx context.Context) (map[string]protocol.Lease, bool) {
	leases, err := s.listAll(ctx, s.set.ns)
	if err != nil && ctx.Err() != nil {
		return nil, false
	}
	if err != nil {
		s.problems = append(s.problems, "list targets: "+err.Error())
		s.log.Warn("scheduler: list targets failed; claiming nothing this round", "err", err)
		return nil, false
	}
	inSet := make(map[string]bool, len(s.current))
	for _, t := range s.current {
		inSet[t] = true
	}
	m := make(map[string]protocol.Lease, len(leases))
	for _, l := range leases {
		m[l.Key.Name] = l
		if l.Owner != s.id && inSet[l.Key.Name] {
			s.expiries = append(s.expiries, l.FreeAt())
		}
	}
	return m, true
}

// giveUp hands over the targets that left the set, then the targets beyond
// the fair share: idle ones first, then the most recently acquired.
func (s *Scheduler) giveUp() {
	inSet := make(map[string]bool, len(s.current))
	for _, t := range s.current {
		inSet[t] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var active []*lease
	for _, l := range s.leases {
		if l.state != StateRunning && l.state != StateIdle {
			continue
		}
		if !inSet[l.target] {
			s.handOverLocked(l, "the target left the set", ErrRemoved)
			continue
		}
		active = append(active, l)
	}
	extra := len(active) - s.share
	if extra <= 0 {
		return
	}
	slices.SortFunc(active, func(a, b *lease) int {
		if (a.state == StateIdle) != (b.state == StateIdle) {
			if a.state == StateIdle {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.seq, a.seq)
	})
	why := fmt.Sprintf("handing over: held %d, over the fair share %d (%s, %s)", len(active), s.share, count(s.total, "target"), count(s.workers, "worker"))
	for _, l := range active[:extra] {
		s.handOverLocked(l, why, ErrHandedOver)
	}
}

func (s *Scheduler) handOverLocked(l *lease, why string, cause error) {
	s.giveUpLocked(l, StateHandingOver, why, cause)
}

// giveUpLocked cancels l's handler with cause, to release l once it
// returned, and reports it. Called with s.mu held.
func (s *Scheduler) giveUpLocked(l *lease, state State, why string, cause error) {
	l.state, l.reason = state, why
	l.cancel(cause)
	s.log.Info("scheduler: giving up target", "target", l.target, "token", l.token, "why", why)
	s.events = append(s.events, s.eventLocked(EventHandedOver, l, cause))
	s.poke()
}

// claim acquires free targets, in a random order, until the worker holds
// its fair share. Acquires whose outcome is unknown are retried first, even
// when the worker holds its share already: a lease it turns out to hold
// beyond its share is released at once, and a replayed acquire whose lease
// has ended (the store refused the confirming renew) is, below the share,
// followed at once by an acquire with a new request id, without a back-off.
// It skips targets held by a live lease (the store's list),
// targets it holds or still winds down, and targets backed off after a
// conflict; it stops at the first store failure, at until, so that a
// long claim does not hold back the next round's renewals, and as soon as
// the worker is no longer a member. An acquire
// under way when ctx ends is cut short: the shutdown resends it.
func (s *Scheduler) claim(ctx context.Context, holders map[string]protocol.Lease, until time.Time) {
	s.mu.Lock()
	member := s.membership != nil
	active := 0
	for _, l := range s.leases {
		if l.state == StateRunning || l.state == StateIdle {
			active++
		}
	}
	deficit := s.share - active
	var candidates []string
	now := time.Now()
	for _, t := range s.current {
		if _, mine := s.leases[t]; mine {
			continue
		}
		if h, held := holders[t]; held && !(h.Owner == s.id && s.pending[t] != "") {
			continue
		}
		if b := s.backoff[t]; b.until.After(now) {
			if b.delayed {
				s.expiries = append(s.expiries, b.until)
			}
			continue
		}
		candidates = append(candidates, t)
	}
	why := fmt.Sprintf("fair share %d (%s, %s)", s.share, count(s.total, "target"), count(s.workers, "worker"))
	s.mu.Unlock()
	if !member {
		return
	}
	if deficit <= 0 {
		// Only the acquires whose outcome is unknown remain to resolve.
		candidates = slices.DeleteFunc(candidates, func(t string) bool { return s.pending[t] == "" })
	}
	rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	// Acquires whose outcome is unknown first: the worker may hold those
	// leases already, and would otherwise leave them unworked until they
	// ran out, the targets blocked for every other worker.
	rank := func(t string) int {
		if s.pending[t] != "" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(candidates, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	for _, t := range candidates {
		if (deficit <= 0 && s.pending[t] == "") || ctx.Err() != nil || time.Now().After(until) || !s.isMember() {
			return // (no longer a member: the store signalled it, or the membership lapsed, since the claim began)
		}
		key := protocol.Key{Namespace: s.set.ns, Name: t}
		actx, cancel := context.WithTimeout(ctx, s.set.opTimeout)
		l, sent, err := s.acquire(actx, key, s.pending[t])
		cancel()
		if err != nil && ctx.Err() != nil {
			return // cut short by the stop: the shutdown resolves it
		}
		if errors.Is(err, errReplayEnded) && deficit > 0 && !time.Now().After(until) && s.isMember() {
			// The lease the replayed acquire took has ended: no other
			// worker took the target first, so it is no conflict to back
			// off from. Acquire it anew at once, with a new request id.
			s.log.Info("scheduler: the lease of a replayed acquire has ended; acquiring anew", "target", t, "err", err)
			actx, cancel := context.WithTimeout(ctx, s.set.opTimeout)
			l, sent, err = s.acquire(actx, key, "")
			cancel()
			if err != nil && ctx.Err() != nil {
				return // cut short by the stop: the shutdown resolves it
			}
		}
		var perr *protocol.Error
		switch {
		case err == nil && deficit <= 0:
			// The worker held the lease beyond its share: hand it over.
			s.log.Info("scheduler: an acquire whose outcome was unknown took the lease; over the fair share, releasing it",
				"target", t, "token", l.Token, "why", why)
			s.releaseLeases(ctx, []*lease{{target: t, key: key, token: l.Token, state: StateHandingOver, deadline: sent.Add(s.set.ttl)}})
		case err == nil:
			delete(s.backoff, t)
			s.start(l, sent, fmt.Sprintf("%s; held %d when acquired", why, active))
			active++
			deficit--
		case errors.As(err, &perr) && perr.KeptByLockDelay():
			// No holder: the lock-delay of an ended lease keeps the key
			// until a known time. Try again then, not before, and do not
			// count it as a conflict in a row.
			free := perr.Lease.FreeAt()
			s.expiries = append(s.expiries, free)
			s.backoff[t] = backoffState{n: s.backoff[t].n, until: free, delayed: true}
			s.log.Debug("scheduler: target kept by a lock-delay; trying again when it ends", "target", t, "until", free)
			s.busy(t, err)
		case errors.Is(err, protocol.ErrConflict):
			s.backOff(t)
			holder := ""
			if errors.As(err, &perr) && perr.Lease != nil {
				holder = perr.Lease.Owner
				s.untilExpiry(t, perr.Lease.FreeAt()) // its expiry, plus its lock-delay
			}
			s.log.Debug("scheduler: target busy; backing off", "target", t, "holder", holder, "until", s.backoff[t].until)
			s.busy(t, err)
		case noOutcome(err):
			s.problems = append(s.problems, "acquire: "+err.Error())
			s.log.Warn("scheduler: acquire failed; claiming no more this round", "target", t, "err", err)
			return
		case errors.Is(err, errReplayEnded):
			// Over the share (or out of time, or no longer a member):
			// the acquire whose outcome was unknown holds nothing, and
			// there is nothing left to resolve. Not a conflict: no
			// back-off.
			s.log.Info("scheduler: the lease of a replayed acquire has ended; nothing held", "target", t, "err", err)
		default:
			s.backOff(t)
			s.problems = append(s.problems, "acquire: "+err.Error())
			s.log.Warn("scheduler: acquire refused", "target", t, "err", err)
		}
	}
}

// maxBusyWatches bounds the busy targets a worker listens to (see
// watchBusy).
const maxBusyWatches = 8

// watchBusy listens, while the worker is a member below its fair share
// after a claim, for the end of up to maxBusyWatches busy targets of the
// set (held by another worker by holders, the round's list, or backed off
// after a conflict), those listened to already first, the others picked at
// random; it stops listening to the rest. When the store signals that one
// of them may have been released or revoked (protocol.Notifier) and a get
// finds no live lease, Run clears its back-off and looks at once (see
// listenFreed): a released target is taken then, not at the next round.
// A store that does not signal gets no watch (after one subscription
// answered protocol.ErrNoNotifier, none is tried), nor does a store whose
// subscriptions are capped (protocol.CappedNotifier: an httpapi client,
// whose server bounds its streams), since a watch is an optimization and
// must not take the stream a holder's watch of its own lease needs to
// hear a revoke at once: rounds find the target.
func (s *Scheduler) watchBusy(holders map[string]protocol.Lease) {
	if _, ok := s.store.(protocol.Notifier); !ok || s.noSignals.Load() || s.cappedSignals {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	active := 0
	for _, l := range s.leases {
		if l.state == StateRunning || l.state == StateIdle {
			active++
		}
	}
	want := map[string]bool{}
	if s.membership != nil && active < s.share {
		var busy []string
		now := time.Now()
		for _, t := range s.current {
			if _, mine := s.leases[t]; mine {
				continue
			}
			h, held := holders[t]
			b := s.backoff[t]
			conflicted := b.until.After(now) && !b.delayed && !b.handedOver
			if (held && h.Owner != s.id) || (!held && conflicted) {
				busy = append(busy, t)
			}
		}
		rand.Shuffle(len(busy), func(i, j int) { busy[i], busy[j] = busy[j], busy[i] })
		slices.SortStableFunc(busy, func(a, b string) int {
			_, wa := s.busyWatches[a]
			_, wb := s.busyWatches[b]
			return cmp.Compare(boolRank(wa), boolRank(wb))
		})
		for _, t := range busy[:min(len(busy), maxBusyWatches)] {
			want[t] = true
		}
	}
	s.dropBusyWatchesLocked(want)
	for t := range want {
		if s.busyWatches[t] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(s.base)
		w := &busyWatch{cancel: cancel}
		s.busyWatches[t] = w
		s.watches.Go(func() { s.listenFreed(ctx, t, w) })
	}
}

// boolRank ranks true before false.
func boolRank(b bool) int {
	if b {
		return 0
	}
	return 1
}

// dropBusyWatchesLocked stops listening to the busy targets not in keep
// (to every one when keep is nil). Called with s.mu held.
func (s *Scheduler) dropBusyWatchesLocked(keep map[string]bool) {
	for t, w := range s.busyWatches {
		if !keep[t] {
			w.cancel()
			delete(s.busyWatches, t)
		}
	}
}

// listenFreed listens for the end of busy target t's lease until ctx
// ends: once subscribed (a release since the round's list included) and
// at each signal of the store, it reads the key, and when no live lease
// holds it, it notes t freed and wakes Run, which looks at once. A
// subscription that fails (the store cannot signal now) ends the watch:
// the next round may start another, and rounds find the target meanwhile.
func (s *Scheduler) listenFreed(ctx context.Context, t string, w *busyWatch) {
	key := protocol.Key{Namespace: s.set.ns, Name: t}
	ch, unsubscribe, err := s.store.(protocol.Notifier).Subscribe(ctx, key)
	if err != nil {
		s.mu.Lock()
		if s.busyWatches[t] == w {
			delete(s.busyWatches, t)
		}
		s.mu.Unlock()
		w.cancel()
		if errors.Is(err, protocol.ErrNoNotifier) {
			s.noSignals.Store(true)
			return
		}
		if ctx.Err() == nil && !closedAnswer(err) {
			s.log.Debug("scheduler: cannot listen for the end of a busy target; rounds find it", "target", t, "err", err)
		}
		return
	}
	defer unsubscribe()
	for {
		gctx, cancel := context.WithTimeout(ctx, s.set.opTimeout)
		_, err := s.store.Get(gctx, protocol.GetRequest{Key: key})
		cancel()
		if protocol.StatusOf(err) == protocol.StatusNotFound && ctx.Err() == nil {
			s.mu.Lock()
			if s.busyWatches[t] == w {
				if s.freed == nil {
					s.freed = map[string]bool{}
				}
				s.freed[t] = true
				s.poke()
			}
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// isMember reports whether the worker holds its membership lease. It
// takes s.mu.
func (s *Scheduler) isMember() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.membership != nil
}

// busy reports that an acquire of t answered conflict (err). It
// takes s.mu.
func (s *Scheduler) busy(t string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.eventLocked(EventBusy, nil, err)
	ev.Target = t
	s.events = append(s.events, ev)
}

// backOff delays the next attempt on t: d is RenewEvery, doubling with
// each conflict in a row, up to MaxBackoff; the wait is random, uniform
// between d/2 and 1.5 × d but under MaxBackoff, so that the waits of
// workers that met the same conflict stay spread out at the cap too.
func (s *Scheduler) backOff(t string) {
	b := s.backoff[t]
	b.n++
	b.delayed, b.handedOver = false, false
	d := s.set.maxBackoff
	if b.n <= 20 && s.set.every<<(b.n-1) < d {
		d = s.set.every << (b.n - 1)
	}
	lo, hi := d/2, min(d+d/2, s.set.maxBackoff)
	b.until = time.Now().Add(lo + time.Duration(rand.Float64()*float64(hi-lo)))
	s.backoff[t] = b
}

// untilExpiry shortens t's back-off to the expiry of the lease that holds
// it, when that comes first (a holder that no longer renews), and notes
// the expiry so that the worker looks again then.
func (s *Scheduler) untilExpiry(t string, expiresAt time.Time) {
	s.expiries = append(s.expiries, expiresAt)
	b := s.backoff[t]
	if at := expiresAt.Add(expiryMargin); expiresAt.After(time.Now()) && at.Before(b.until) {
		b.until = at
		s.backoff[t] = b
	}
}

// start records a lease just acquired and runs its handler.
func (s *Scheduler) start(pl protocol.Lease, sent time.Time, reason string) {
	s.seq++
	ctx, cancel := context.WithCancelCause(s.base)
	wctx, unwatch := context.WithCancel(s.base)
	l := &lease{
		target: pl.Key.Name, key: pl.Key, token: pl.Token, seq: s.seq, ctx: ctx, cancel: cancel, unwatch: unwatch,
		done: make(chan struct{}), state: StateRunning, reason: reason,
		acquiredAt: pl.AcquiredAt, expiresAt: pl.ExpiresAt, deadline: sent.Add(s.set.ttl),
	}
	s.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.deadline), func() { s.onDeadline(l) })
	s.leases[l.target] = l
	s.events = append(s.events, s.eventLocked(EventAcquired, l, nil))
	s.mu.Unlock()
	s.log.Info("scheduler: acquired", "target", l.target, "token", l.token, "why", reason)
	go func() {
		s.handler(ctx, l.target, l.token)
		close(l.done)
		s.poke()
	}()
	// The store's signal tells of a revoke at once, also while the lease is
	// given up and its handler finishes; renewals are the fallback.
	s.watches.Go(func() {
		protocol.WatchLease(wctx, s.store, pl, s.set.opTimeout, func(why error) {
			if closedStore(why) {
				return
			}
			s.mu.Lock()
			s.loseLocked(l, why, false)
			s.mu.Unlock()
			s.flush()
		})
	})
}

// shutdown cancels every handler, keeps renewing until each returned,
// releases every lease and then the membership. The leases given up
// earlier whose release got no answer are released once more, at once,
// beside the others.
func (s *Scheduler) shutdown(next *time.Timer) {
	s.stopping = true
	s.mu.Lock()
	s.dropBusyWatchesLocked(nil)
	for _, l := range s.leases {
		if l.state == StateRunning || l.state == StateIdle {
			s.giveUpLocked(l, StateStopping, "shutting down", ErrStopped)
		}
	}
	n := len(s.leases)
	s.mu.Unlock()
	retried := s.sendReleases(s.base, s.takeUnreleased())
	s.log.Info("scheduler: stopping", "leases", n)
	s.settle(s.base)
	for {
		s.flush()
		s.mu.Lock()
		n := len(s.leases)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-s.wake:
		case <-next.C:
			// Release what returned first: only the leases whose
			// handlers still run need renewing.
			s.settle(s.base)
			s.mu.Lock()
			n := len(s.leases)
			s.mu.Unlock()
			if n > 0 {
				s.renewAll(s.base)
			}
			next.Reset(jitter(s.set.every))
		}
		s.settle(s.base)
	}
	retried()
	for t, id := range s.pending {
		s.orphan(protocol.Key{Namespace: s.set.ns, Name: t}, id)
	}
	clear(s.pending)
	s.mu.Lock()
	m := s.membership
	s.dropMembershipLocked()
	token := s.lapsed
	s.mu.Unlock()
	if m != nil {
		<-m.watched // its release is no loss to hear
	}
	if m == nil && s.memberReq != "" { // a join whose answer was lost
		s.orphan(s.member, s.memberReq)
	}
	s.resolveOrphans(s.base)
	// A membership that ran out by the local clock (its renewals' answers
	// lost) may still be live with the lapsed token.
	if m != nil {
		token = m.token
	}
	if token != 0 {
		ctx, cancel := context.WithTimeout(s.base, s.set.opTimeout)
		_, err := s.store.Release(ctx, protocol.ReleaseRequest{Key: s.member, Owner: s.id, Token: token, RequestID: s.newID()})
		cancel()
		if err != nil && !refused(err) {
			s.log.Warn("scheduler: release of the membership failed; it will expire", "token", token, "err", err)
		}
	}
	// Every lease is forgotten (its watch cancelled): each watch ends
	// once its store call under way returns.
	s.watches.Wait()
	s.waitRenewals()
	// The events of the releases sent again above, the orphans' and the
	// watches' last ones: nothing queues one after this.
	s.flush()
	s.log.Info("scheduler: stopped")
}

// waitRenewals waits for the renewals still under way: those cut short
// when a renewal of their lease got its outcome (see renewOne), which a
// store that ignores its context's end may still be working on. Run
// returns only then, so that the store may be closed once it returned.
// It warns when they have not ended after OpTimeout.
func (s *Scheduler) waitRenewals() {
	done := make(chan struct{})
	go func() {
		s.renewals.Wait()
		close(done)
	}()
	wait := time.NewTimer(s.set.opTimeout)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
		s.log.Warn("scheduler: waiting for renewals cut short that the store still works on: it ignores their context's end")
		<-done
	}
}

// eventLocked builds an event with the current counts. Called with s.mu held.
func (s *Scheduler) eventLocked(kind EventKind, l *lease, cause error) Event {
	ev := Event{Kind: kind, Worker: s.id, Namespace: s.set.ns, Cause: cause,
		Share: s.share, Workers: s.workers, Targets: s.total}
	if l != nil {
		ev.Target, ev.Token = l.target, l.token
	}
	for _, l := range s.leases {
		if l.state == StateRunning || l.state == StateIdle {
			ev.Owned++
		}
	}
	return ev
}

// flush passes the queued events to the observer, outside s.mu.
func (s *Scheduler) flush() {
	s.mu.Lock()
	evs := s.events
	s.events = nil
	s.mu.Unlock()
	if s.set.observer == nil {
		return
	}
	for _, ev := range evs {
		s.set.observer.ObserveScheduler(s.base, ev)
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxJitter is the largest fraction by which [jitter] shortens or
// lengthens an interval.
const maxJitter = 0.1

// jitter returns d ±maxJitter (10%).
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - maxJitter + 2*maxJitter*rand.Float64()))
}

// count writes n of noun: "1 worker", "2 workers".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
