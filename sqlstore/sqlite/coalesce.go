package sqlite

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// Coalescing (group commit). A Backend runs one write transaction at a
// time (SQLite allows one writer per file). A write that finds none
// running runs its own transaction at once, as if there were no
// coalescing: a lone caller never waits for anyone. Writes that arrive
// while one runs wait in a queue, and when it ends everything queued (up
// to maxWriteBatch, in arrival order) runs in one transaction: one commit,
// one fsync (synchronous=FULL). Each write runs in a savepoint of its own,
// sees the writes before it, and is rolled back alone when it fails or
// changes nothing; its result or error is its own. If the commit fails,
// every write of the batch that changed something fails with it.
//
// Queued writes wait on a channel rather than sleeping and polling in
// SQLite's busy handler (1, 2, 5, 10, ... 100 ms steps), where a writer
// that lost a few rounds sleeps long and can keep losing. Writers in other
// processes, or other Backends on the same file, are still arbitrated by
// SQLite's lock and the busy timeout.
//
// A batch runs in a goroutine of the Backend's, under a deadline of its
// own (the latest of its writes'), so that no caller's deadline or
// cancellation fails the others. A caller whose context ends while its
// write waits in the queue gets timeout and the write is never run; once
// a batch has taken it, the caller waits for the batch's answer.

// maxWriteBatch bounds the writes of one transaction.
const maxWriteBatch = 64

// pendingWrite is one write waiting for, or in, a batch.
type pendingWrite struct {
	op       protocol.Op
	fn       change
	deadline time.Time     // the caller's, zero for none
	done     chan struct{} // closed when res and err are set
	res      protocol.Result
	err      error
}

// writer is the Backend's write queue; it is safe for concurrent use.
type writer struct {
	maxBatch int // maxWriteBatch, or 1 with Config.NoCoalescing

	mu      sync.Mutex
	writing bool // a transaction of this Backend runs
	queue   []*pendingWrite
	wg      sync.WaitGroup // batch goroutines
	batches int64          // transactions of more than one write (tests read it)
}

// write runs fn in a write transaction: at once when none runs, else in
// the next batch. now is read once the write lock is held.
func (b *Backend) write(ctx context.Context, op protocol.Op, fn change) (protocol.Result, error) {
	w := &b.writer
	w.mu.Lock()
	if !w.writing {
		w.writing = true
		w.mu.Unlock()
		res, err := b.writeAlone(ctx, op, fn)
		b.nextWrite()
		return res, err
	}
	p := &pendingWrite{op: op, fn: fn, done: make(chan struct{})}
	p.deadline, _ = ctx.Deadline()
	w.queue = append(w.queue, p)
	w.mu.Unlock()
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
	}
	w.mu.Lock()
	queued := false
	if i := slices.Index(w.queue, p); i >= 0 {
		w.queue = slices.Delete(w.queue, i, i+1)
		queued = true
	}
	w.mu.Unlock()
	if queued {
		return protocol.Result{}, b.interpret(ctx, op, ctx.Err())
	}
	// The batch has it: fn may be running, and writes what it captured,
	// so wait for the batch to end (it is bounded by its own deadline).
	<-p.done
	return p.res, p.err
}

// nextWrite ends a transaction: it hands the writer to a batch of the
// queued writes, or frees it.
func (b *Backend) nextWrite() {
	w := &b.writer
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		w.writing = false
		return
	}
	batch := w.take()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for batch != nil {
			b.writeBatch(batch)
			w.mu.Lock()
			if len(w.queue) == 0 {
				w.writing = false
				batch = nil
			} else {
				batch = w.take()
			}
			w.mu.Unlock()
		}
	}()
}

// take removes the next batch from the queue; w.mu is held.
func (w *writer) take() []*pendingWrite {
	n := min(len(w.queue), w.maxBatch)
	batch := slices.Clone(w.queue[:n])
	w.queue = slices.Delete(w.queue, 0, n)
	if n > 1 {
		w.batches++
	}
	return batch
}

// writeAlone runs fn in one BEGIN IMMEDIATE transaction (the DSN's
// _txlock, see OpenDB).
func (b *Backend) writeAlone(ctx context.Context, op protocol.Op, fn change) (protocol.Result, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return protocol.Result{}, b.interpret(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	res, commit, err := fn(ctx, tx, b.clock())
	if err != nil {
		return protocol.Result{}, b.interpret(ctx, op, err)
	}
	if commit {
		if err := tx.Commit(); err != nil {
			return protocol.Result{}, b.interpret(ctx, op, err)
		}
	}
	return res, nil
}

// writeBatch runs batch in one transaction, each write in a savepoint.
func (b *Backend) writeBatch(batch []*pendingWrite) {
	deadline := time.Now().Add(protocol.DefaultTimeout)
	if latest := slices.MaxFunc(batch, func(x, y *pendingWrite) int { return x.deadline.Compare(y.deadline) }).deadline; !latest.IsZero() {
		deadline = latest
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	if len(batch) == 1 {
		p := batch[0]
		p.res, p.err = b.writeAlone(ctx, p.op, p.fn)
		return
	}
	fail := func(ps []*pendingWrite, err error) {
		for _, p := range ps {
			p.res, p.err = protocol.Result{}, b.interpret(ctx, p.op, err)
		}
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		fail(batch, err)
		return
	}
	defer func() { _ = tx.Rollback() }()
	now := b.clock()
	var changed []*pendingWrite
	for _, p := range batch {
		if _, err := tx.ExecContext(ctx, qSavepoint); err != nil {
			fail(batch, err)
			return
		}
		res, commit, err := p.fn(ctx, tx, now)
		if err != nil || !commit {
			if _, rerr := tx.ExecContext(ctx, qRollbackSavepoint); rerr != nil {
				fail(batch, rerr)
				return
			}
		}
		if _, err := tx.ExecContext(ctx, qReleaseSavepoint); err != nil {
			fail(batch, err)
			return
		}
		if err != nil {
			p.err = b.interpret(ctx, p.op, err)
			continue
		}
		p.res = res
		if commit {
			changed = append(changed, p)
		}
	}
	if err := tx.Commit(); err != nil {
		fail(changed, err)
	}
}

// waitWrites waits for the batches in flight (Close).
func (b *Backend) waitWrites() { b.writer.wg.Wait() }
