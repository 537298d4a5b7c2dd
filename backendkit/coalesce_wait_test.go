package backendkit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
)

// TestCoalescerWaitDuringDo: Wait is what a backend's Close calls while
// its callers may still write (sqlite and postgres Close call it with
// writes in flight, and say so). A slot given back by a write run alone
// starts the queue's batch (next, startLocked: wg.Add(1) from zero)
// without any ordering against a concurrent Wait: sync.WaitGroup forbids
// that ("calls with a positive delta that occur when the counter is zero
// must happen before a Wait"), the race detector reports it, and the
// runtime may panic "WaitGroup misuse: Add called concurrently with Wait"
// in a caller's goroutine when a batch ends at that moment. Run with -race.
// The sleep only keeps the Wait unordered with the batch's start, as a
// Close in another goroutine is; it asserts nothing.
func TestCoalescerWaitDuringDo(t *testing.T) {
	var ran atomic.Int32
	c := backendkit.NewCoalescer(1, 8, time.Second, func(context.Context, []*op) {
		time.Sleep(300 * time.Millisecond) // the batch is in flight when Wait comes
		ran.Add(1)
	})
	queued := make(chan struct{})
	aloneRuns := make(chan struct{})
	go c.Do(t.Context(), &op{id: 1}, func() { close(aloneRuns); <-queued }, false)
	<-aloneRuns
	done := make(chan backendkit.Outcome, 1)
	go func() { done <- c.Do(t.Context(), &op{id: 2}, func() { t.Error("op 2 ran alone") }, false) }()
	for c.QueueLen() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(queued) // op 1 gives its slot back: op 2's batch starts (wg.Add)
	time.Sleep(100 * time.Millisecond)
	c.Wait() // a Close's, unordered with that start
	if ran.Load() != 1 {
		t.Errorf("Wait returned before the batch in flight ended (%d batches ran)", ran.Load())
	}
	if got := <-done; got != backendkit.Ran {
		t.Errorf("op 2: %v, want Ran", got)
	}
}
