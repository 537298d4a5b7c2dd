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
// context of their own: the latest of their callers' deadlines (or
// batchTimeout from now when none has one), so that no caller's deadline
// or cancellation fails the others.
//
// The backend's batch function answers every operation it is given (T is
// typically a pointer to the backend's pending operation, which holds the
// answer); Do returns once it has. A Coalescer is safe for concurrent use.
type Coalescer[T any] struct {
	limit, maxBatch int
	batchTimeout    time.Duration
	batch           func(ctx context.Context, ops []T)

	mu       sync.Mutex
	inflight int
	queue    []*queued[T]
	wg       sync.WaitGroup // batch goroutines
}

// queued is an operation in the queue, or in the batch that took it.
type queued[T any] struct {
	op       T
	deadline time.Time     // the caller's; zero for none
	done     chan struct{} // closed when the batch function returned
}

// NewCoalescer returns a Coalescer that runs at most limit operations at
// once (at least 1) and hands batch at most maxBatch queued operations at
// a time (at least 1).
func NewCoalescer[T any](limit, maxBatch int, batchTimeout time.Duration, batch func(ctx context.Context, ops []T)) *Coalescer[T] {
	return &Coalescer[T]{limit: max(limit, 1), maxBatch: max(maxBatch, 1), batchTimeout: batchTimeout, batch: batch}
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
// operation that holds the caller's state until it is answered).
func (c *Coalescer[T]) Do(ctx context.Context, op T, alone func(), waitBatch bool) Outcome {
	c.mu.Lock()
	if c.inflight < c.limit && len(c.queue) == 0 {
		c.inflight++
		c.mu.Unlock()
		alone()
		c.next()
		return Ran
	}
	q := &queued[T]{op: op, done: make(chan struct{})}
	q.deadline, _ = ctx.Deadline()
	c.queue = append(c.queue, q)
	c.mu.Unlock()
	select {
	case <-q.done:
		return Ran
	case <-ctx.Done():
	}
	c.mu.Lock()
	i := slices.Index(c.queue, q)
	if i >= 0 {
		c.queue = slices.Delete(c.queue, i, i+1)
	}
	c.mu.Unlock()
	switch {
	case i >= 0:
		return NotSent
	case waitBatch:
		<-q.done
		return Ran
	default:
		return Running
	}
}

// next frees a slot, or hands it to batches of the queued operations
// until the queue is empty.
func (c *Coalescer[T]) next() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.inflight--
		return
	}
	batch := c.take()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for batch != nil {
			c.run(batch)
			c.mu.Lock()
			if len(c.queue) == 0 {
				c.inflight--
				batch = nil
			} else {
				batch = c.take()
			}
			c.mu.Unlock()
		}
	}()
}

// take removes the next batch from the queue; c.mu is held.
func (c *Coalescer[T]) take() []*queued[T] {
	n := min(len(c.queue), c.maxBatch)
	batch := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	return batch
}

// run hands batch to the batch function under the batch's own deadline,
// then tells its callers.
func (c *Coalescer[T]) run(batch []*queued[T]) {
	deadline := time.Now().Add(c.batchTimeout)
	if latest := slices.MaxFunc(batch, func(x, y *queued[T]) int { return x.deadline.Compare(y.deadline) }).deadline; !latest.IsZero() {
		deadline = latest
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer func() {
		for _, q := range batch {
			close(q.done)
		}
	}()
	ops := make([]T, len(batch))
	for i, q := range batch {
		ops[i] = q.op
	}
	c.batch(ctx, ops)
}

// QueueLen returns how many operations wait in the queue.
func (c *Coalescer[T]) QueueLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Wait waits for the batches in flight (a backend's Close).
func (c *Coalescer[T]) Wait() { c.wg.Wait() }
