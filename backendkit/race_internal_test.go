package backendkit

import (
	"context"
	"testing"
	"time"
)

// TestDoAnswersABatchThatEndedAsItsContextDid: when the caller's context
// ends while its batch ends too, the answer is there and Do returns Ran:
// answering Running (the outcome unknown, a timeout to the caller) sent
// the caller to retry an operation whose answer it had. The hook makes
// both happen before Do waits; select chose either at random.
func TestDoAnswersABatchThatEndedAsItsContextDid(t *testing.T) {
	for i := range 64 {
		ran := make(chan struct{})
		c := NewCoalescer(1, 8, time.Minute, func(context.Context, []int) { close(ran) })
		held, hold := make(chan struct{}), make(chan struct{})
		go c.Do(context.Background(), 0, func() { close(held); <-hold }, false)
		<-held
		ctx, cancel := context.WithCancel(context.Background())
		c.beforeWait = func() {
			close(hold) // the slot frees and takes the queued operation as its batch
			<-ran       // the batch function ran
			c.Wait()    // and its goroutine told the caller and ended
			cancel()    // and the caller's context ends too
		}
		if got := c.Do(ctx, 1, func() { t.Error("ran alone while the slot was held") }, false); got != Ran {
			t.Fatalf("round %d: Do = %v for an operation whose batch had answered, want Ran", i, got)
		}
		cancel()
		c.Wait()
	}
}
