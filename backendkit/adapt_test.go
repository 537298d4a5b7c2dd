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
	for _, hardMax := range []int{2, 1} {
		ran := make(chan int, 1)
		c := NewCoalescer(1, 8, time.Minute, func(_ context.Context, ops []int) { ran <- len(ops) })
		c.Adapt(hardMax)
		release, held := make(chan struct{}), make(chan struct{})
		go c.Do(t.Context(), 0, func() { close(held); <-release }, false)
		<-held
		done := make(chan Outcome)
		go func() { done <- c.Do(t.Context(), 1, func() { t.Error("ran alone while the slot was held") }, false) }()
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
		close(release)
		if hardMax == 1 {
			<-ran
		}
		if got := <-done; got != Ran {
			t.Fatalf("Do = %v, want Ran", got)
		}
		c.Wait()
	}
}
