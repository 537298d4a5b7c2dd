package backendkit

import (
	"context"
	"testing"
	"time"
)

// The adaptive limit grows to its maximum while round trips take their
// best time, shrinks to its floor once they take several times it (the
// server queues them), and grows again when they speed up; a batch's longer
// round trip, measured against batches of its size, is no sign of queuing.
func TestAdaptiveLimitFollowsLatency(t *testing.T) {
	a := newAdaptive(4, 16)
	now := time.Unix(0, 0)
	feed := func(n int, d time.Duration, times int) int {
		var l int
		for range times {
			now = now.Add(time.Millisecond)
			l = a.observe(n, d, now)
		}
		return l
	}
	if l := feed(1, time.Millisecond, 400); l != 16 {
		t.Fatalf("limit %d after steady 1 ms round trips, want 16", l)
	}
	if l := feed(16, 8*time.Millisecond, 400); l != 16 {
		t.Fatalf("limit %d after steady batches of 16 taking 8 ms, want 16", l)
	}
	if l := feed(1, 6*time.Millisecond, 400); l != 4 {
		t.Fatalf("limit %d after round trips took 6 times their best, want the floor, 4", l)
	}
	if l := feed(1, time.Millisecond, 400); l != 16 {
		t.Fatalf("limit %d after round trips took their best again, want 16", l)
	}
	if w := a.maxWait(); w != 2*time.Millisecond {
		t.Fatalf("max wait %v, want twice the smoothed lone round trip (2ms)", w)
	}
}

// With an adaptive limit, an operation queued while the only slot is held
// (an operation its key keeps waiting) goes in a round trip of its own
// after the max wait; at the hard maximum it waits for the slot.
func TestAdaptiveQueueWaitsAtMostMaxWait(t *testing.T) {
	queueWaitsAtMostMaxWait(t, func(c *Coalescer[int], hardMax int) { c.Adapt(hardMax) })
}

// With a fixed limit that Unstick bounds, an operation queued while the
// only slot is held (an operation its key keeps waiting) goes in a round
// trip of its own after the max wait, as with an adaptive limit; at the
// hard maximum it waits for the slot. Round trips that take their best
// time leave the limit as given.
func TestUnstickQueueWaitsAtMostMaxWait(t *testing.T) {
	queueWaitsAtMostMaxWait(t, func(c *Coalescer[int], hardMax int) { c.Unstick(hardMax) })
	for _, hardMax := range []int{2, 1} {
		c := NewCoalescer(1, 8, time.Minute, func(context.Context, []int) {})
		c.Unstick(hardMax)
		for range 400 {
			c.Do(t.Context(), 0, func() {}, false)
		}
		if l := c.Limit(); l != 1 {
			t.Fatalf("max %d: limit %d after 400 quick round trips, want the fixed 1", hardMax, l)
		}
		c.Wait()
	}
}

// queueWaitsAtMostMaxWait checks, for a limit of 1 that bound makes bounded
// (Adapt or Unstick) with hard maximums 2 and 1, that an operation queued
// behind the held slot runs in a round trip of its own after the max wait
// when the maximum allows, and waits for the slot when it does not.
func queueWaitsAtMostMaxWait(t *testing.T, bound func(c *Coalescer[int], hardMax int)) {
	t.Helper()
	for _, hardMax := range []int{2, 1} {
		ran := make(chan int, 1)
		c := NewCoalescer(1, 8, time.Minute, func(_ context.Context, ops []int) { ran <- len(ops) })
		bound(c, hardMax)
		release := holdSlot(t, c)
		done := make(chan Outcome, 1)
		enqueue(t, c, 1, done)
		select {
		case n := <-ran:
			if hardMax == 1 {
				t.Fatalf("max 1: a batch of %d ran while the only slot was held", n)
			}
		case <-time.After(map[int]time.Duration{1: 300 * time.Millisecond, 2: 5 * time.Second}[hardMax]):
			if hardMax == 2 {
				t.Fatal("max 2: the queued operation still waits for the held slot after 5s")
			}
		}
		release()
		if hardMax == 1 {
			<-ran
		}
		if got := <-done; got != Ran {
			t.Fatalf("Do = %v, want Ran", got)
		}
		c.Wait()
	}
}

// With an adaptive limit, an operation queued while the slots' round trips
// are on time waits for one of those slots, however long it waited: a
// round trip over the limit would only split the batches. Here the only
// slot runs a batch of two whose class takes 400 ms (smoothed), a lone
// round trip 1 ms: the queued operation must not go before that batch
// ends (300 ms later), and then goes in the slot's next batch.
func TestAdaptiveQueueWaitsForRoundTripsOnTime(t *testing.T) {
	batches := make(chan []int, 8)
	holdPair := make(chan struct{})
	c := NewCoalescer(1, 8, time.Minute, func(_ context.Context, ops []int) {
		batches <- ops
		if ops[0] == 1 {
			<-holdPair
		}
	})
	c.Adapt(2)
	c.mu.Lock()
	c.adapt.smooth[class(1)], c.adapt.smooth[class(2)] = 0.001, 0.4
	c.mu.Unlock()

	// An operation alone in the only slot, held past its 2 ms: the two
	// queued meanwhile go as a batch over the limit (the slot overran)
	// once the hard maximum lets them (it is 1 until both queued).
	c.mu.Lock()
	c.adapt.max = 1
	c.mu.Unlock()
	release := holdSlot(t, c)
	outcomes := make(chan Outcome, 3)
	for op := 1; op <= 2; op++ {
		enqueue(t, c, op, outcomes)
		for c.QueueLen() < op {
			time.Sleep(100 * time.Microsecond)
		}
	}
	c.mu.Lock()
	c.adapt.max = 2
	c.mu.Unlock()
	select {
	case got := <-batches:
		if len(got) != 2 {
			t.Fatalf("first batch %v, want the two queued operations", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the two operations queued behind an overrun slot still wait after 5s")
	}
	release()

	// One round trip in flight (the pair's, on time), the limit back at
	// 1: a third operation queues.
	c.mu.Lock()
	c.limit, c.adapt.limit = 1, 1
	c.mu.Unlock()
	enqueue(t, c, 3, outcomes)
	select {
	case got := <-batches:
		t.Fatalf("batch %v started while the only round trip in flight was on time", got)
	case <-time.After(300 * time.Millisecond):
	}
	close(holdPair)
	if got := <-batches; len(got) != 1 || got[0] != 3 {
		t.Fatalf("next batch %v, want [3]", got)
	}
	for range 3 {
		if got := <-outcomes; got != Ran {
			t.Fatalf("Do = %v, want Ran", got)
		}
	}
	c.Wait()
}

// A slot under the limit is no round trip over it: when the limit grew
// while operations queued (more than a batch of them, so the slot that
// ends takes only some), the kick starts a slot for them without waiting
// for a round trip in flight to overrun. Here the only round trip in
// flight is on time for 800 ms; the limit grows to 3 while two operations
// queue (batches of one): one of them must go within 500 ms.
func TestAdaptiveKickFillsSlotsUnderTheLimit(t *testing.T) {
	batches := make(chan []int, 8)
	c := NewCoalescer(1, 1, time.Minute, func(_ context.Context, ops []int) { batches <- ops })
	c.Adapt(4)
	c.mu.Lock()
	c.adapt.smooth[class(1)] = 0.4 // a lone round trip: on time for 800 ms; maxWait 100 ms
	c.mu.Unlock()
	release := holdSlot(t, c)
	outcomes := make(chan Outcome, 2)
	for op := 1; op <= 2; op++ {
		enqueue(t, c, op, outcomes)
	}
	for c.QueueLen() < 2 {
		time.Sleep(100 * time.Microsecond)
	}
	c.mu.Lock()
	c.limit, c.adapt.limit = 3, 3
	c.mu.Unlock()
	select {
	case <-batches:
	case <-time.After(500 * time.Millisecond):
		t.Error("no batch within 500 ms with 1 round trip in flight under a limit of 3")
	}
	release()
	for range 2 {
		if got := <-outcomes; got != Ran {
			t.Fatalf("Do = %v, want Ran", got)
		}
	}
	c.Wait()
}

// holdSlot runs an operation alone in a free slot of c and holds it there;
// the function it returns lets it end and checks that it ran.
func holdSlot(t *testing.T, c *Coalescer[int]) (release func()) {
	let, held, done := make(chan struct{}), make(chan struct{}), make(chan Outcome)
	go func() { done <- c.Do(t.Context(), 0, func() { close(held); <-let }, false) }()
	<-held
	return func() {
		close(let)
		if got := <-done; got != Ran {
			t.Errorf("held operation: Do = %v, want Ran", got)
		}
	}
}

// enqueue sends op to c from a goroutine of its own, as an operation that
// must wait for a batch (a slot is held); its outcome goes to outcomes.
func enqueue(t *testing.T, c *Coalescer[int], op int, outcomes chan<- Outcome) {
	go func() {
		outcomes <- c.Do(t.Context(), op, func() { t.Error("ran alone while the slot was held") }, false)
	}()
}
