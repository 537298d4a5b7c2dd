package backendkit

import "time"

// Gathering (a group commit's commit delay). In a closed loop (each caller
// sends its next operation as soon as the last one is answered: a worker
// that acquires and then releases, a renewal loop, a benchmark) the
// callers of a batch come back a few tens of microseconds after it ends.
// Without waiting, the queue at that moment holds only those that arrived
// while the batch ran, the returning callers queue behind the next batch,
// and the callers split into two groups that take turns: twice the
// commits for the same operations, and with one slot a caller alone in
// its group pays a whole commit for itself.
//
// With [Coalescer.Gather], a slot that ran a batch of n operations waits,
// before it takes the next batch, until n more operations have queued (all
// its callers are back, up to maxBatch) or for at most a quarter of the
// batch's own duration, capped by the maximum given: waiting costs a
// fraction of the commit that it saves. While it waits the slot stays
// taken: with every slot taken (SQLite's one writer), an operation that
// arrives queues instead of running alone; with a slot free it runs alone
// at once, as always, and the wait ends without it. Operations already
// queued wait too, at most that long.
//
// A wait counts the operations that queued since it began, whichever slot
// takes them: with two or more slots, another slot's batch may take the
// callers it waited for (TestGatherCountsArrivalsAnotherSlotTakes). An
// operation that runs alone on a free slot never queued and is not
// counted: callers that all come back that way make the wait a miss.
//
// Callers that do not come back (an open loop: operations arrive when
// they arrive) would make every batch wait in vain. A wait that ends with
// fewer than half the callers back is a miss: the next batch does not wait
// at all, and each further miss doubles the batches that do not (up to
// 64); a wait that fills resets it. So an open loop pays a wait on one
// batch in 64 once the misses add up. One slot gathers at a time.
type gathering struct {
	max      time.Duration // 0: off
	skip     int           // batches that do not wait, after misses
	misses   int           // consecutive misses
	arrivals int64         // operations ever queued
	target   int64         // while waiting: the arrivals that end the wait; 0 when none waits
	full     chan struct{} // while waiting: closed when arrivals reach target
	// counters for tests: batches that waited, and waits that filled
	waited, filled int64
	// tests only: the channel that ends a wait as its timer would; nil: a
	// timer of the wait's duration. Called with c.mu released.
	expiry func(wait time.Duration) <-chan time.Time
}

// DefaultGatherMax is the longest a slot of the SQL backends waits for
// its callers after a batch: a few times what a caller takes to come back
// on a loaded machine (about 40 µs measured on 2 cores), well under a
// commit.
const DefaultGatherMax = 200 * time.Microsecond

// maxGatherSkip bounds the batches that do not wait after misses.
const maxGatherSkip = 64

// Gather lets a slot wait, after a batch, for its callers' next
// operations, at most a quarter of the batch's duration and at most max;
// 0 turns it off. It may be called at any time, from the
// batch function too: it applies to batches that end after it (a wait
// under way runs its course). A backend whose batches stop saving round
// trips (PostgreSQL refused its batch function) turns it off.
func (c *Coalescer[T]) Gather(max time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gather.max = max
}

// Gathered returns how many batches waited for their callers' next
// operations, and how many of those waits filled (every caller came back).
func (c *Coalescer[T]) Gathered() (waited, filled int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gather.waited, c.gather.filled
}

// queued counts an operation that queued, and ends a wait when enough
// did; c.mu is held. Arrivals are counted rather than the queue's length,
// which another slot's batch may shorten meanwhile.
func (g *gathering) queued() {
	g.arrivals++
	if g.target > 0 && g.arrivals >= g.target {
		g.target = 0
		close(g.full)
	}
}

// gatherLocked waits, after a batch of n operations that took d, for n
// more operations to queue (fewer when maxBatch is nearer; see gathering);
// c.mu is held, and released while it waits.
func (c *Coalescer[T]) gatherLocked(n int, d time.Duration) {
	g := &c.gather
	if g.max <= 0 || n < 2 || g.target > 0 {
		return
	}
	if g.skip > 0 {
		g.skip--
		return
	}
	want := min(n, c.maxBatch-len(c.queue)) // arrivals that make the next batch full
	if want <= 0 {
		return
	}
	wait := min(d/4, g.max)
	if wait <= 0 {
		return
	}
	g.waited++
	start := g.arrivals
	g.target, g.full = start+int64(want), make(chan struct{})
	full, expiry := g.full, g.expiry
	c.mu.Unlock()
	t := time.NewTimer(wait)
	expired := t.C
	if expiry != nil {
		expired = expiry(wait)
	}
	select {
	case <-full:
	case <-expired:
	}
	t.Stop()
	c.mu.Lock()
	if g.full == full {
		g.target = 0 // not another slot's wait, begun since ours filled
	}
	switch back := int(g.arrivals - start); {
	case back >= want:
		g.filled++
		g.misses, g.skip = 0, 0
	case 2*back < want:
		g.skip = min(1<<g.misses, maxGatherSkip)
		g.misses = min(g.misses+1, 6) // 1<<6 = maxGatherSkip
	}
}
