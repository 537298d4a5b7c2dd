package sqlite

import (
	"context"
	"sync/atomic"

	"github.com/leasestore/leasestore/backendkit"
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
// changes nothing; its result or error is its own once the batch commits.
// After a batch, the writer waits a moment for its callers' next writes
// (backendkit.Coalescer.Gather): callers in a loop then share one commit
// instead of taking turns in two.
// If the commit fails, every write of the batch fails with it, also those
// that changed nothing: their answers (a conflict, a replay, a refusal)
// were judged against the batch's earlier writes, which did not happen.
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
//
// A transaction's deadline is its BEGIN's context: database/sql rolls the
// transaction back when it ends, and Commit refuses once it has ended, so
// a write whose deadline passes before its commit writes nothing. Its
// statements run under that context without the deadline
// (statementContext): the driver would start a goroutine for each
// statement to interrupt it at the deadline, about a tenth of the
// writer's time per write, and the write lock is already held (BEGIN
// IMMEDIATE, OpenDB's _txlock), so no statement waits for another
// writer. On a *sql.DB given to New without _txlock=immediate, a write
// whose first statement writes (a sweep, a prune) may wait in SQLite's
// busy handler up to the busy timeout past its deadline.

// maxWriteBatch bounds the writes of one transaction.
const maxWriteBatch = 64

// pendingWrite is one write waiting for, or in, a batch.
type pendingWrite struct {
	op  protocol.Op
	fn  change
	res protocol.Result // the answer: set by the batch
	err error
}

// writer is the Backend's write queue (backendkit.Coalescer, one write
// transaction at a time); it is safe for concurrent use.
type writer struct {
	q       *backendkit.Coalescer[*pendingWrite]
	batches atomic.Int64 // transactions of more than one write (tests read it)
}

// newWriter returns the write queue of b, whose batches hold at most
// maxBatch writes.
func newWriter(b *Backend, maxBatch int) *writer {
	q := backendkit.NewCoalescer(1, maxBatch, protocol.DefaultTimeout, b.writeBatch)
	q.Gather(backendkit.DefaultGatherMax)
	return &writer{q: q}
}

// write runs fn in a write transaction: at once when none runs, else in
// the next batch. now is read once the write lock is held.
func (b *Backend) write(ctx context.Context, op protocol.Op, fn change) (protocol.Result, error) {
	p := &pendingWrite{op: op, fn: fn}
	// A write taken by a batch may be running, and writes what fn
	// captured: Do waits for its batch to end (bounded by the batch's own
	// deadline).
	if b.writer.q.Do(ctx, p, func() { p.res, p.err = b.writeAlone(ctx, op, fn) }, true) == backendkit.NotSent {
		return protocol.Result{}, b.interpret(ctx, op, ctx.Err())
	}
	return p.res, p.err
}

// statementContext returns the context of the statements of a write
// transaction begun under ctx: ctx without its deadline or cancellation,
// which the transaction itself honours (see Coalescing above).
func statementContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// writeAlone runs fn in one BEGIN IMMEDIATE transaction (the DSN's
// _txlock, see OpenDB).
func (b *Backend) writeAlone(ctx context.Context, op protocol.Op, fn change) (protocol.Result, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return protocol.Result{}, b.interpret(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	res, commit, err := fn(statementContext(ctx), tx, b.clock())
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
func (b *Backend) writeBatch(ctx context.Context, batch []*pendingWrite) {
	if len(batch) == 1 {
		p := batch[0]
		p.res, p.err = b.writeAlone(ctx, p.op, p.fn)
		return
	}
	b.writer.batches.Add(1)
	fail := func(err error) { // every write: none of the batch happened
		for _, p := range batch {
			p.res, p.err = protocol.Result{}, b.interpret(ctx, p.op, err)
		}
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	defer func() { _ = tx.Rollback() }()
	now, sctx := b.clock(), statementContext(ctx)
	for _, p := range batch {
		if _, err := tx.ExecContext(sctx, qSavepoint); err != nil {
			fail(err)
			return
		}
		res, commit, err := p.fn(sctx, tx, now)
		if err != nil || !commit {
			if _, rerr := tx.ExecContext(sctx, qRollbackSavepoint); rerr != nil {
				fail(rerr)
				return
			}
		}
		if _, err := tx.ExecContext(sctx, qReleaseSavepoint); err != nil {
			fail(err)
			return
		}
		if err != nil {
			p.err = b.interpret(ctx, p.op, err)
			continue
		}
		p.res = res
	}
	if err := tx.Commit(); err != nil {
		fail(err)
	}
}

// waitWrites waits for the batches in flight (Close).
func (b *Backend) waitWrites() { b.writer.q.Wait() }
