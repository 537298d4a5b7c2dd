package backendkit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGatherCountsArrivalsAnotherSlotTakes: with two slots, slot A ran a
// batch of 4 and waits for its 4 callers; 3 of them queue, the other slot
// frees and takes those 3 as its own batch, then the 4th queues. All 4
// came back: the wait fills (and A takes the 4th), though the queue never
// held more than 3. Scored by the queue's length it was a miss (1 of 4
// back), and the backoff stopped the next batch's wait. The wait's timer
// is the test's, so nothing here depends on timing.
func TestGatherCountsArrivalsAnotherSlotTakes(t *testing.T) {
	bStarted, releaseB := make(chan struct{}), make(chan struct{})
	c := NewCoalescer(2, 8, time.Minute, func(_ context.Context, ops []int) {
		switch ops[0] {
		case 10: // A's batch of 4: long enough for a wait of a quarter of it
			time.Sleep(time.Millisecond)
		case 20: // B's batch, which takes 3 of A's callers
			close(bStarted)
			<-releaseB
		}
	})
	c.Gather(time.Hour)
	waiting, expire := make(chan struct{}), make(chan time.Time, 1)
	var waits atomic.Int32
	c.gather.expiry = func(time.Duration) <-chan time.Time {
		if waits.Add(1) == 1 {
			close(waiting)
			return expire // A's wait: the test ends it, if the arrivals do not
		}
		at := make(chan time.Time) // later waits (B's) end at once
		close(at)
		return at
	}

	var wg sync.WaitGroup
	// do runs op in a goroutine; done is closed when Do returned.
	do := func(op int, alone func()) (done chan struct{}) {
		done = make(chan struct{})
		wg.Go(func() {
			defer close(done)
			if got := c.Do(t.Context(), op, alone, false); got != Ran {
				t.Errorf("op %d: Do = %v, want Ran", op, got)
			}
		})
		return done
	}
	mustQueue := func(op int) func() { return func() { t.Errorf("op %d ran alone, want it queued", op) } }
	waitQueue := func(n int) {
		for c.QueueLen() != n {
			time.Sleep(100 * time.Microsecond)
		}
	}
	// hold runs op alone in a slot until the returned release is called.
	hold := func(op int) (release func()) {
		held, rel := make(chan struct{}), make(chan struct{})
		do(op, func() { close(held); <-rel })
		<-held
		return func() { close(rel) }
	}

	releaseA, releaseX2 := hold(1), hold(2) // both slots taken
	for op := 10; op < 14; op++ {
		do(op, mustQueue(op))
		waitQueue(op - 9)
	}
	releaseA() // the slot takes the 4 queued as a batch, then waits for them
	<-waiting
	for op := 20; op < 23; op++ {
		do(op, mustQueue(op))
		waitQueue(op - 19)
	}
	releaseX2() // the other slot takes those 3 as its batch
	<-bStarted
	last := do(23, mustQueue(23))
	// The 4th is queued: it is in the queue, or A's wait filled and A ran
	// it. Then the wait's time is up, if it has not ended already.
	for ran := false; !ran && c.QueueLen() != 1; {
		select {
		case <-last:
			ran = true
		case <-time.After(100 * time.Microsecond):
		}
	}
	expire <- time.Time{}
	<-last // A ran it after its wait, which is scored by now

	c.mu.Lock()
	waited, filled, skip, misses := c.gather.waited, c.gather.filled, c.gather.skip, c.gather.misses
	c.mu.Unlock()
	close(releaseB)
	wg.Wait()
	c.Wait()
	if waited != 1 || filled != 1 {
		t.Errorf("Gathered() = %d waited, %d filled; want 1 and 1: all 4 callers came back", waited, filled)
	}
	if skip != 0 || misses != 0 {
		t.Errorf("after a wait that filled: skip %d, misses %d; want 0 and 0", skip, misses)
	}
}
