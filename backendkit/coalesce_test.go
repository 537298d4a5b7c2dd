package backendkit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
)

// op is an operation of the tests' fake backend: it records how it ran.
type op struct {
	id      int
	alone   bool
	batchOf int
}

// TestCoalescerLoneCallerRunsAlone: with a free slot, an operation runs at
// once through alone, in the caller's goroutine, and no batch runs.
func TestCoalescerLoneCallerRunsAlone(t *testing.T) {
	c := backendkit.NewCoalescer(2, 8, time.Second, func(context.Context, []*op) { t.Error("a batch ran") })
	for i := range 3 {
		o := &op{id: i}
		if got := c.Do(t.Context(), o, func() { o.alone = true }, false); got != backendkit.Ran || !o.alone {
			t.Fatalf("Do = %v, alone %v; want Ran alone", got, o.alone)
		}
	}
	c.Wait()
}

// TestCoalescerBatchesWhileSlotsAreTaken: while the only slot is held,
// callers queue; when it frees, they go to the batch function together, in
// arrival order, at most maxBatch at a time, under the latest deadline.
func TestCoalescerBatchesWhileSlotsAreTaken(t *testing.T) {
	var (
		mu        sync.Mutex
		batches   [][]int
		deadlines []time.Time
	)
	c := backendkit.NewCoalescer(1, 3, time.Hour, func(ctx context.Context, ops []*op) {
		mu.Lock()
		defer mu.Unlock()
		var ids []int
		for _, o := range ops {
			o.batchOf = len(ops)
			ids = append(ids, o.id)
		}
		batches = append(batches, ids)
		d, _ := ctx.Deadline()
		deadlines = append(deadlines, d)
	})
	release := make(chan struct{})
	held := make(chan struct{})
	go c.Do(t.Context(), &op{id: -1}, func() { close(held); <-release }, false)
	<-held
	far := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	ops := make([]*op, 5)
	for i := range ops {
		ops[i] = &op{id: i}
		ctx, cancel := context.WithDeadline(t.Context(), far.Add(-time.Duration(i)*time.Second))
		defer cancel()
		for c.QueueLen() != i {
			time.Sleep(time.Millisecond)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := c.Do(ctx, ops[i], func() { t.Error("ran alone while the slot was held") }, false); got != backendkit.Ran {
				t.Errorf("Do = %v, want Ran", got)
			}
		}()
	}
	for c.QueueLen() != 5 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	c.Wait()
	if len(batches) != 2 || len(batches[0]) != 3 || len(batches[1]) != 2 ||
		batches[0][0] != 0 || batches[0][2] != 2 || batches[1][0] != 3 || batches[1][1] != 4 {
		t.Fatalf("batches %v; want [0 1 2] then [3 4]", batches)
	}
	if !deadlines[0].Equal(far) || !deadlines[1].Equal(far.Add(-3*time.Second)) {
		t.Fatalf("batch deadlines %v; want each batch's latest caller deadline", deadlines)
	}
}

// TestCoalescerCancelled: a caller whose context ends while its operation
// is queued gets NotSent and the operation never runs; one whose batch has
// taken it gets Running at once, or, with waitBatch, Ran once the batch
// ended.
func TestCoalescerCancelled(t *testing.T) {
	inBatch := make(chan struct{})
	finish := make(chan struct{})
	var ran atomic.Int32
	c := backendkit.NewCoalescer(1, 8, time.Second, func(ctx context.Context, ops []*op) {
		ran.Add(int32(len(ops)))
		close(inBatch)
		<-finish
	})
	release := make(chan struct{})
	held := make(chan struct{})
	go c.Do(t.Context(), &op{}, func() { close(held); <-release }, false)
	<-held

	// Cancelled while queued.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan backendkit.Outcome)
	go func() { done <- c.Do(ctx, &op{id: 1}, func() {}, false) }()
	for c.QueueLen() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if got := <-done; got != backendkit.NotSent || c.QueueLen() != 0 {
		t.Fatalf("Do = %v, queue %d; want NotSent and an empty queue", got, c.QueueLen())
	}

	// Cancelled while its batch runs: one caller returns at once, the
	// other waits for the batch.
	ctx2, cancel2 := context.WithCancel(t.Context())
	ctx3, cancel3 := context.WithCancel(t.Context())
	done2, done3 := make(chan backendkit.Outcome), make(chan backendkit.Outcome)
	go func() { done2 <- c.Do(ctx2, &op{id: 2}, func() {}, false) }()
	for c.QueueLen() != 1 {
		time.Sleep(time.Millisecond)
	}
	go func() { done3 <- c.Do(ctx3, &op{id: 3}, func() {}, true) }()
	for c.QueueLen() != 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-inBatch
	cancel2()
	cancel3()
	if got := <-done2; got != backendkit.Running {
		t.Fatalf("Do = %v, want Running", got)
	}
	select {
	case got := <-done3:
		t.Fatalf("Do with waitBatch returned %v before its batch ended", got)
	case <-time.After(50 * time.Millisecond):
	}
	close(finish)
	if got := <-done3; got != backendkit.Ran {
		t.Fatalf("Do with waitBatch = %v, want Ran", got)
	}
	c.Wait()
	if ran.Load() != 2 {
		t.Fatalf("%d operations reached the batch function, want 2 (the one cancelled in the queue never runs)", ran.Load())
	}
}

// batchSizes is a batch function that takes d and records the size of
// each batch it ran.
type batchSizes struct {
	d     time.Duration
	mu    sync.Mutex
	sizes []int
}

func (s *batchSizes) run(_ context.Context, ops []*op) {
	time.Sleep(s.d)
	s.mu.Lock()
	s.sizes = append(s.sizes, len(ops))
	s.mu.Unlock()
}

// TestCoalescerGatherJoinsClosedLoop: callers that send their next
// operation as soon as the last one is answered. Without gathering they
// split into two groups that take turns (a batch of 7 and a batch of 1,
// about 4 an operation on average); with it, the slot waits for the
// batch's callers and every batch holds nearly all of them.
func TestCoalescerGatherJoinsClosedLoop(t *testing.T) {
	const callers, rounds = 8, 25
	s := &batchSizes{d: 4 * time.Millisecond}
	c := backendkit.NewCoalescer(1, 64, time.Minute, s.run)
	c.Gather(2 * time.Millisecond) // a quarter of the batch: 1 ms
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range rounds {
				o := &op{}
				c.Do(t.Context(), o, func() { time.Sleep(s.d) }, false)
			}
		})
	}
	wg.Wait()
	c.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := 0
	for _, n := range s.sizes {
		ops += n
	}
	mean := float64(ops) / float64(len(s.sizes))
	waited, filled := c.Gathered()
	t.Logf("%d batches of %.1f operations on average; %d waits, %d filled", len(s.sizes), mean, waited, filled)
	if mean < 6 {
		t.Errorf("batches of %.1f operations on average, want at least 6 of the %d callers: %v", mean, callers, s.sizes)
	}
	if filled == 0 {
		t.Errorf("no wait filled (%d waits)", waited)
	}
}

// TestCoalescerGatherBacksOffInOpenLoop: when a batch's callers do not
// come back, waiting for them is a miss, and each miss doubles the
// batches that do not wait: of 40 batches in vain, only those after 0, 1,
// 2, 4, 8 and 16 skipped ones wait (6).
func TestCoalescerGatherBacksOffInOpenLoop(t *testing.T) {
	s := &batchSizes{d: 2 * time.Millisecond}
	c := backendkit.NewCoalescer(1, 64, time.Minute, s.run)
	c.Gather(time.Millisecond)
	batched := 0
	for batched < 40 {
		release, done := holdSlot(t, c)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { c.Do(t.Context(), &op{}, func() { t.Error("ran alone while the slot was held") }, false) })
		}
		for c.QueueLen() < 2 {
			time.Sleep(100 * time.Microsecond)
		}
		release()
		wg.Wait()
		<-done
		c.Wait() // the slot's wait, if any, ends before the next round
		batched++
	}
	waited, filled := c.Gathered()
	if filled != 0 {
		t.Errorf("%d waits filled, want none: nobody came back", filled)
	}
	if waited != 6 {
		t.Errorf("%d of %d batches waited, want 6 (after 0, 1, 2, 4, 8 and 16 that did not)", waited, batched)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.sizes {
		if n != 2 {
			t.Fatalf("batch sizes %v, want batches of 2", s.sizes)
		}
	}
}

// TestCoalescerGatherOff: without Gather, a slot never waits.
func TestCoalescerGatherOff(t *testing.T) {
	s := &batchSizes{d: time.Millisecond}
	c := backendkit.NewCoalescer(1, 64, time.Minute, s.run)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				c.Do(t.Context(), &op{}, func() { time.Sleep(s.d) }, false)
			}
		})
	}
	wg.Wait()
	c.Wait()
	if waited, _ := c.Gathered(); waited != 0 {
		t.Errorf("%d batches waited without Gather", waited)
	}
}

// TestCoalescerPanicAloneFreesItsSlot: an operation that panics while it
// runs alone panics in its caller, and its slot is free again: with one
// slot, the next caller runs at once instead of queuing for a slot that
// nobody gives back.
func TestCoalescerPanicAloneFreesItsSlot(t *testing.T) {
	c := backendkit.NewCoalescer(1, 8, time.Second, func(context.Context, []*op) {})
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the operation's panic", p)
			}
		}()
		c.Do(t.Context(), &op{}, func() { panic("boom") }, false)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	o := &op{}
	if got := c.Do(ctx, o, func() { o.alone = true }, false); got != backendkit.Ran || !o.alone {
		t.Fatalf("after a panic alone: Do = %v, alone %v; want Ran alone (queue %d)", got, o.alone, c.QueueLen())
	}
	c.Wait()
}

// TestCoalescerPanicInBatchReachesItsCallers: a batch function that
// panics panics in each caller of the batch that still waits for it
// (where a caller can recover, as a server does), not in the Coalescer's
// goroutine, which would end the process; the Coalescer keeps serving.
func TestCoalescerPanicInBatchReachesItsCallers(t *testing.T) {
	c := backendkit.NewCoalescer(1, 8, time.Second, func(context.Context, []*op) { panic("batch boom") })
	release, heldDone := holdSlot(t, c)
	recovered := make(chan any, 2)
	for i := range 2 {
		go func() {
			defer func() { recovered <- recover() }()
			c.Do(t.Context(), &op{id: i}, func() { t.Error("ran alone while the slot was held") }, i == 1)
		}()
		for c.QueueLen() != i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	release()
	<-heldDone
	for range 2 {
		if p := <-recovered; p != "batch boom" {
			t.Errorf("a caller of the batch recovered %v, want the batch function's panic", p)
		}
	}
	// The callers are told before the batch's goroutine gives the slot
	// back: wait for it, or the next operation may queue for that slot
	// and meet the panicking batch function (make test did).
	c.Wait()
	o := &op{}
	if got := c.Do(t.Context(), o, func() { o.alone = true }, false); got != backendkit.Ran || !o.alone {
		t.Fatalf("after a batch panicked: Do = %v, alone %v; want Ran alone", got, o.alone)
	}
	c.Wait()
}

// TestCoalescerAdaptStartsWithinThePool: Adapt with a maximum under the
// limit given to NewCoalescer caps the limit at once, before any round
// trip is measured: a second operation queues rather than running beside
// the first over a pool of one connection.
func TestCoalescerAdaptStartsWithinThePool(t *testing.T) {
	c := backendkit.NewCoalescer(2, 8, time.Second, func(context.Context, []*op) {})
	c.Adapt(1)
	if got := c.Limit(); got != 1 {
		t.Errorf("Limit() = %d after Adapt(1), want 1", got)
	}
	release, done := holdSlot(t, c)
	second := make(chan struct{})
	go func() {
		defer close(second)
		c.Do(t.Context(), &op{}, func() { t.Error("a second operation ran alone beside the first over a pool of one") }, false)
	}()
	deadline := time.Now().Add(2 * time.Second)
	for c.QueueLen() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	release()
	<-done
	<-second
	c.Wait()
}

// TestCoalescerCallerWithoutDeadlineKeepsItsBatchTimeout: a caller with
// no deadline, batched with one whose deadline is near, gets a batch of
// the batch timeout from now, not the other caller's deadline (which
// would cut its operation short: no caller's deadline fails the others).
func TestCoalescerCallerWithoutDeadlineKeepsItsBatchTimeout(t *testing.T) {
	var deadline atomic.Value // time.Time
	c := backendkit.NewCoalescer(1, 8, time.Hour, func(ctx context.Context, ops []*op) {
		d, _ := ctx.Deadline()
		deadline.Store(d)
	})
	release, done := holdSlot(t, c)
	near, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i, ctx := range []context.Context{t.Context(), near} {
		wg.Go(func() { c.Do(ctx, &op{id: i}, func() { t.Error("ran alone while the slot was held") }, false) })
		for c.QueueLen() != i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	start := time.Now()
	release()
	wg.Wait()
	<-done
	c.Wait()
	if got := deadline.Load().(time.Time); got.Before(start.Add(59 * time.Minute)) {
		t.Fatalf("batch deadline %v from now, want the batch timeout (1h): a caller in it has no deadline", time.Until(got).Round(time.Second))
	}
}

// holdSlot runs an operation alone that holds one of c's slots until
// release is called; done is closed when its Do returned.
func holdSlot(t *testing.T, c *backendkit.Coalescer[*op]) (release func(), done <-chan struct{}) {
	rel, held, d := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d)
		c.Do(t.Context(), &op{}, func() { close(held); <-rel }, false)
	}()
	<-held
	return func() { close(rel) }, d
}
