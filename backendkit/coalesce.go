package backendkit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Coalescer is the queue behind a backend's coalescing (group commit). At
// most limit operations run at once. An operation that finds a free slot
// and nobody queued runs at once, in its caller's goroutine and under its
// caller's context: a lone caller never waits for anyone. Operations that
// arrive while every slot is taken wait in a queue; when a slot frees,
// the queued ones go, up to maxBatch at a time in arrival order, to the
// backend's batch function, in a goroutine of the Coalescer's, under a
// context of their own: the latest of their callers' deadlines (at least
// batchTimeout from now when one has none), so that no caller's deadline
// or cancellation fails the others.
//
// The backend's batch function answers every operation it is given (T is
// typically a pointer to the backend's pending operation, which holds the
// answer); Do returns once it has. A Coalescer is safe for concurrent use.
//
// [Coalescer.Adapt] makes the limit follow measured latency:
// more round trips at once while the server answers them as fast as it
// answers one, fewer and larger batches once they queue there; and a queued
// operation waits at most a few round trips' time for a slot.
// [Coalescer.Unstick] keeps the limit fixed and gives the queue that
// bound alone: a slot held by an operation its key keeps waiting holds no
// one else up.
// [Coalescer.Gather] lets a slot wait briefly after a batch for its
// callers' next operations; Gather(0), at any time,
// turns that off.
type Coalescer[T any] struct {
	limit, maxBatch int
	batchTimeout    time.Duration
	batch           func(ctx context.Context, ops []T)

	mu       sync.Mutex
	inflight int
	queue    []*queued[T]
	running  int         // batch goroutines running (c.mu); Wait waits until none
	idle     *sync.Cond  // on c.mu: signalled when running drops to 0
	adapt    *adaptive   // nil: limit stays fixed, and the queue waits for a slot however long
	kick     *time.Timer // adaptive: starts a round trip for the queue (see kicked)
	trips    []trip      // adaptive: the round trips running
	gather   gathering   // after a batch, waiting for its callers' next operations

	// tests only: called by Do once its operation queued, before it waits
	beforeWait func()
}

// trip is a round trip that runs: when it started and how many
// operations it carries.
type trip struct {
	start time.Time
	n     int
}

// queued is an operation in the queue, or in the batch that took it.
type queued[T any] struct {
	op       T
	at       time.Time     // when it queued
	deadline time.Time     // the caller's; zero for none
	done     chan struct{} // closed when the batch function returned
	// Set under c.mu: left, when the caller returned Running; panicked,
	// before done is closed, the batch function's panic for a caller that
	// had not left (Do panics with it).
	left     bool
	panicked any
}

// NewCoalescer returns a Coalescer that runs at most limit operations at
// once (at least 1) and hands batch at most maxBatch queued operations at
// a time (at least 1).
func NewCoalescer[T any](limit, maxBatch int, batchTimeout time.Duration, batch func(ctx context.Context, ops []T)) *Coalescer[T] {
	c := &Coalescer[T]{limit: max(limit, 1), maxBatch: max(maxBatch, 1), batchTimeout: batchTimeout, batch: batch}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// Outcome says how [Coalescer.Do] ended.
type Outcome int

const (
	// Ran: the operation ran, alone or in a batch, and has its answer.
	Ran Outcome = iota
	// NotSent: the caller's context ended while the operation waited in
	// the queue; it never ran.
	NotSent
	// Running: the caller's context ended while the operation's batch ran;
	// the operation may or may not take effect.
	Running
)

// Do runs op: through alone, at once, when a slot is free and nobody
// waits; else with the next batch. When ctx ends first, Do returns NotSent
// if no batch took op yet (it is removed from the queue), else Running,
// or, with waitBatch, waits for that batch to end and returns Ran (for an
// operation that holds the caller's state until it is answered). A panic
// of alone, or of the batch function while the caller waits for its
// batch, panics in Do's caller; the slot is given back either way.
func (c *Coalescer[T]) Do(ctx context.Context, op T, alone func(), waitBatch bool) Outcome {
	c.mu.Lock()
	if c.inflight < c.limit && len(c.queue) == 0 {
		c.inflight++
		start := c.tripStartedLocked(1)
		c.mu.Unlock()
		c.runAlone(start, alone)
		return Ran
	}
	q := &queued[T]{op: op, at: time.Now(), done: make(chan struct{})}
	q.deadline, _ = ctx.Deadline()
	c.queue = append(c.queue, q)
	c.gather.queued()
	switch {
	case c.adapt != nil && c.inflight < c.limit:
		// A slot is free (the limit grew): the queue goes now.
		c.startLocked()
	case c.adapt != nil && len(c.queue) == 1:
		c.kick.Reset(c.adapt.maxWait())
	}
	c.mu.Unlock()
	if c.beforeWait != nil {
		c.beforeWait()
	}
	select {
	case <-q.done:
		return q.answered()
	case <-ctx.Done():
	}
	select {
	case <-q.done:
		// The batch answered as the context ended: the answer wins (select
		// picks either at random).
		return q.answered()
	default:
	}
	c.mu.Lock()
	i := slices.Index(c.queue, q)
	if i >= 0 {
		c.queue = slices.Delete(c.queue, i, i+1)
	}
	// A caller whose batch already panicked hears the panic.
	q.left = i < 0 && !waitBatch && q.panicked == nil
	c.mu.Unlock()
	switch {
	case i >= 0:
		return NotSent
	case q.left:
		return Running
	default:
		<-q.done
		return q.answered()
	}
}

// answered returns Ran for an operation whose batch ended, or panics with
// the batch function's panic.
func (q *queued[T]) answered() Outcome {
	if q.panicked != nil {
		panic(q.panicked)
	}
	return Ran
}

// runAlone runs alone in the slot that Do took for it, which started its
// round trip at start, and gives the slot back, also when alone panics
// (the panic goes on to Do's caller).
func (c *Coalescer[T]) runAlone(start time.Time, alone func()) {
	defer func() {
		c.tripEnded(start, 1)
		c.next()
	}()
	alone()
}

// next frees a slot, or hands it to batches of the queued operations
// until the queue is empty (or, adaptive, the limit shrank below the
// round trips in flight).
func (c *Coalescer[T]) next() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	if len(c.queue) > 0 && (c.inflight < c.limit || c.inflight == 0) {
		c.startLocked()
	}
}

// startLocked takes a slot and runs batches of the queue in a goroutine
// until the queue is empty or the slot is over the limit; c.mu is held.
func (c *Coalescer[T]) startLocked() {
	c.inflight++
	batch := c.take()
	// A count under c.mu, not a sync.WaitGroup: a goroutine may start
	// here (a slot given back by an operation run alone) while Wait runs,
	// which a WaitGroup forbids (TestCoalescerWaitDuringDo).
	c.running++
	go func() {
		defer func() {
			c.mu.Lock()
			if c.running--; c.running == 0 {
				c.idle.Broadcast()
			}
			c.mu.Unlock()
		}()
		for batch != nil {
			d := c.run(batch)
			c.mu.Lock()
			if c.inflight <= c.limit || c.inflight == 1 {
				c.gatherLocked(len(batch), d)
			}
			if len(c.queue) == 0 || (c.inflight > c.limit && c.inflight > 1) {
				c.inflight--
				batch = nil
			} else {
				batch = c.take()
			}
			c.mu.Unlock()
		}
	}()
}

// kicked runs when a queued operation waited maxWait: if the queue still
// waits and a slot is free under the limit (it grew), or a round trip in
// flight overran (took more than twice the smoothed latency of round trips
// of its size: a slot held by an operation its key keeps waiting), a round
// trip starts for the queue, over the limit if need be, within the hard
// maximum. While every round trip in flight is on time the queue waits for
// one of their slots: a round trip started over the limit for it would
// shrink the batches the slots send, and cost the server more per
// operation (measured in docs/benchmarks.md).
func (c *Coalescer[T]) kicked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return
	}
	now := time.Now()
	wait := c.adapt.maxWait()
	if waited := now.Sub(c.queue[0].at); waited < wait {
		c.kick.Reset(wait - waited)
		return
	}
	left, running := c.untilOverrunLocked(now)
	switch {
	case c.inflight < c.limit:
		// A slot under the limit (it grew while more than a batch
		// queued): no round trip over it.
	case !running:
		// The slots are between round trips (a gathering wait, or
		// about to take the queue): one of them takes it.
		c.kick.Reset(wait)
		return
	case left > 0:
		c.kick.Reset(max(left, 100*time.Microsecond))
		return
	}
	if c.inflight < c.adapt.max {
		c.startLocked()
	}
	if len(c.queue) > 0 {
		c.kick.Reset(wait)
	}
}

// untilOverrunLocked returns how long until the first round trip in
// flight overruns (at most 0 when one has), and whether any runs; c.mu is
// held.
func (c *Coalescer[T]) untilOverrunLocked(now time.Time) (time.Duration, bool) {
	if len(c.trips) == 0 {
		return 0, false
	}
	left := time.Duration(1<<63 - 1)
	for _, tr := range c.trips {
		left = min(left, c.adapt.onTime(tr.n)-now.Sub(tr.start))
	}
	return left, true
}

// tripStartedLocked records a round trip of n operations that starts now
// and returns its start; c.mu is held.
func (c *Coalescer[T]) tripStartedLocked(n int) time.Time {
	start := time.Now()
	if c.adapt != nil {
		c.trips = append(c.trips, trip{start: start, n: n})
	}
	return start
}

// tripEnded forgets the round trip that started at start with n
// operations and feeds its latency to the adaptive limit.
func (c *Coalescer[T]) tripEnded(start time.Time, n int) {
	if c.adapt == nil {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.IndexFunc(c.trips, func(tr trip) bool { return tr.start.Equal(start) && tr.n == n }); i >= 0 {
		c.trips = slices.Delete(c.trips, i, i+1)
	}
	c.limit = c.adapt.observe(n, now.Sub(start), now)
}

// take removes the next batch from the queue; c.mu is held.
func (c *Coalescer[T]) take() []*queued[T] {
	n := min(len(c.queue), c.maxBatch)
	batch := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	return batch
}

// run hands batch to the batch function under the batch's own deadline,
// then tells its callers; it returns how long the batch function took.
// When the batch function panics, the callers still waiting for it panic
// with its value in their own goroutines (where they may recover), and
// the batch's slot keeps serving; with none waiting, run panics again.
func (c *Coalescer[T]) run(batch []*queued[T]) (d time.Duration) {
	deadline := slices.MaxFunc(batch, func(x, y *queued[T]) int { return x.deadline.Compare(y.deadline) }).deadline
	if slices.ContainsFunc(batch, func(q *queued[T]) bool { return q.deadline.IsZero() }) {
		// A caller without a deadline: at least the batch timeout.
		if d := time.Now().Add(c.batchTimeout); d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ops := make([]T, len(batch))
	for i, q := range batch {
		ops[i] = q.op
	}
	start := time.Now()
	if c.adapt != nil { // set before the first Do, never changed
		c.mu.Lock()
		start = c.tripStartedLocked(len(ops))
		c.mu.Unlock()
	}
	defer func() {
		p := recover()
		d = time.Since(start)
		c.tripEnded(start, len(ops))
		heard := p == nil || c.handPanic(batch, p)
		for _, q := range batch {
			close(q.done)
		}
		if !heard {
			panic(p)
		}
	}()
	c.batch(ctx, ops)
	return d
}

// handPanic gives p, the batch function's panic, to the callers of batch
// that have not left, and reports whether there was one.
func (c *Coalescer[T]) handPanic(batch []*queued[T], p any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	heard := false
	for _, q := range batch {
		if !q.left {
			q.panicked, heard = p, true
		}
	}
	return heard
}

// Adapt makes the limit follow measured latency between the limit given
// to [NewCoalescer] (or max, when that is smaller: the limit starts
// there) and max (the backend's connections), and bounds how
// long a queued operation waits for a slot. Call it before
// the first Do.
func (c *Coalescer[T]) Adapt(max int) {
	c.adapt = newAdaptive(c.limit, max)
	c.limit = int(c.adapt.limit) // within max from the first Do on
	c.kick = time.AfterFunc(time.Hour, c.kicked)
	c.kick.Stop()
}

// Unstick keeps the limit given to [NewCoalescer] and bounds how long a
// queued operation waits for a slot as [Coalescer.Adapt] does: once it
// waited twice a lone round trip's measured latency and a round trip in
// flight overran (took more than twice the usual latency of its size: a
// slot held by an operation its key keeps waiting), a round trip starts
// for the queue over the limit, up to hardMax in flight (the backend's
// connections; at least the limit). Round trips that run on time keep the
// queue waiting for their slots. Call it before the first Do, instead of
// Adapt.
func (c *Coalescer[T]) Unstick(hardMax int) {
	c.adapt = newAdaptive(c.limit, max(hardMax, c.limit))
	c.adapt.fixed = true
	c.kick = time.AfterFunc(time.Hour, c.kicked)
	c.kick.Stop()
}

// Limit returns the current limit of round trips in flight.
func (c *Coalescer[T]) Limit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit
}

// QueueLen returns how many operations wait in the queue.
func (c *Coalescer[T]) QueueLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// TryWait is Wait that does not wait: it reports whether no batch is in
// flight (then Wait would have returned at once).
func (c *Coalescer[T]) TryWait() bool {
	if c.kick != nil {
		c.kick.Stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running == 0
}

// Wait waits for the batches in flight (a backend's Close), also for one
// that starts while it waits.
func (c *Coalescer[T]) Wait() {
	if c.kick != nil {
		c.kick.Stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.running > 0 {
		c.idle.Wait()
	}
}
