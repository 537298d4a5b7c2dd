package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
// A write whose error rolls back the whole transaction (a trigger's
// RAISE(ROLLBACK)) leaves no savepoint to roll back to: the batch fails,
// every other write answering that it was rolled back by that error.
// A write whose change panics in a batch is rolled back to its savepoint
// and fails alone: its caller panics with the value (in its own
// goroutine; a caller that left with timeout hears nothing of it), and
// the other writes go on (TestBatchMemberPanicFailsAlone). So does a
// panic of the after function of a write whose caller left, which the
// batch runs (TestBatchLeftAfterPanicFailsAlone).
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
// cancellation fails the others. Every write keeps its own deadline all
// the same (writeBatch):
//   - A caller whose context ends while its write waits in the queue gets
//     timeout and the write is never run (backendkit.NotSent).
//   - A batch waits for the file's write lock (BEGIN IMMEDIATE, held by
//     another connection: another process, leasectl gc, a second Backend)
//     only until the earliest deadline of its writes; then it leaves out
//     the writes whose deadline passed and begins again for the others. A
//     write is run only if its deadline has not passed when its turn in
//     the transaction comes; one left out was not written, and its caller
//     gets timeout saying so.
//   - A caller whose context ends once its write ran, before the batch
//     committed, gets timeout at once: the write may or may not take
//     effect (the batch commits it if the batch's deadline allows), and a
//     retry with the same request id tells which.
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

// The states of a pendingWrite in a batch. The batch moves a write from
// queued to claimed (it runs it) or dropped (its deadline passed first: it
// is never run), and from claimed to answered once the batch ended. Its
// caller, when its context ends while the batch runs, moves it from queued
// to dropped, or from claimed to left: then the batch, not the caller,
// hands the write's outcome to its after function.
const (
	writeQueued int32 = iota
	writeClaimed
	writeDropped
	writeLeft
	writeAnswered
)

// pendingWrite is one write waiting for, or in, a batch.
type pendingWrite struct {
	ctx   context.Context // the caller's: its deadline and cancellation
	op    protocol.Op
	fn    change
	after func(protocol.Result, error) (protocol.Result, error) // nil: none
	state atomic.Int32
	// The answer, set by the batch: read by the caller once the batch
	// ended (backendkit.Ran) or once state is writeAnswered.
	res protocol.Result
	err error
	// panicked is the panic of fn in a batch of several writes, recovered
	// there so that it fails this write alone: its caller panics with it
	// (writeThen), err saying so to after.
	panicked any
}

// writer is the Backend's write queue (backendkit.Coalescer, one write
// transaction at a time); it is safe for concurrent use.
type writer struct {
	q       *backendkit.Coalescer[*pendingWrite]
	batches atomic.Int64 // transactions of more than one write (tests and benchmarks read it)
	batched atomic.Int64 // the writes of those transactions
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
	return b.writeThen(ctx, op, fn, nil)
}

// writeThen is write, whose outcome goes through after (when not nil)
// before it is returned. after runs once, in the caller's goroutine, or,
// when the caller's context ended while its batch ran the write, in the
// batch's goroutine once the batch ended, with the write's real outcome
// (the caller got timeout): what fn captured is then the batch's until
// after returns, and the caller must not read it on an error.
func (b *Backend) writeThen(ctx context.Context, op protocol.Op, fn change,
	after func(protocol.Result, error) (protocol.Result, error)) (protocol.Result, error) {
	if b.closed.Load() {
		// Not queued behind a batch that Close waits for.
		return protocol.Result{}, b.closedError(op)
	}
	p := &pendingWrite{ctx: ctx, op: op, fn: fn, after: after}
	var (
		res protocol.Result
		err error
	)
	switch b.writer.q.Do(ctx, p, func() { p.res, p.err = b.writeAlone(ctx, op, fn) }, false) {
	case backendkit.Ran:
		if p.panicked != nil {
			// fn panicked in a batch, which rolled it back alone.
			if after != nil {
				_, _ = after(protocol.Result{}, p.err)
			}
			panic(p.panicked)
		}
		res, err = p.res, p.err
	case backendkit.NotSent:
		err = b.interpret(ctx, op, ctx.Err())
	case backendkit.Running:
		var left bool
		res, err, left = b.leave(ctx, p)
		if left {
			return res, err
		}
	}
	if after != nil {
		return after(res, err)
	}
	return res, err
}

// leave answers the caller of p, whose context ended while p's batch ran:
// timeout, saying whether the write was left out (not written) or may
// still be committed (left: the batch then runs p.after), or the answer
// the batch already gave.
func (b *Backend) leave(ctx context.Context, p *pendingWrite) (res protocol.Result, err error, left bool) {
	for {
		switch p.state.Load() {
		case writeQueued:
			if p.state.CompareAndSwap(writeQueued, writeDropped) {
				return protocol.Result{}, b.notWritten(ctx, p.op, ctx.Err()), false
			}
		case writeDropped:
			return protocol.Result{}, b.notWritten(ctx, p.op, ctx.Err()), false
		case writeClaimed:
			if p.state.CompareAndSwap(writeClaimed, writeLeft) {
				return protocol.Result{}, b.effectUnknown(ctx, p.op), true
			}
		case writeAnswered:
			return p.res, p.err, false
		}
	}
}

// notWritten is the timeout of a write left out of its batch: its
// deadline passed (or its caller cancelled it, as cause says) before the
// batch ran it.
func (b *Backend) notWritten(ctx context.Context, op protocol.Op, cause error) error {
	why := "the deadline passed"
	if errors.Is(cause, context.Canceled) {
		why = "the caller cancelled the operation"
	}
	return backendkit.NewError(op, protocol.StatusTimeout, cause,
		"sqlite database %q: %s before the write's batch ran it (the batch waited for the file's write lock, "+
			"held by another connection, or for the writes before it): it was not written", b.file, why)
}

// effectUnknown is the timeout of a caller whose context ended after its
// batch ran its write, before the batch ended.
func (b *Backend) effectUnknown(ctx context.Context, op protocol.Op) error {
	why := "the deadline passed"
	if errors.Is(ctx.Err(), context.Canceled) {
		why = "the caller cancelled the operation"
	}
	return backendkit.NewError(op, protocol.StatusTimeout, ctx.Err(),
		"sqlite database %q: %s while the write's batch ran: the write may or may not take effect "+
			"(retry with the same request id to learn which)", b.file, why)
}

// statementContext returns the context of the statements of a write
// transaction begun under ctx: ctx without its deadline or cancellation,
// which the transaction itself honours (see Coalescing above).
func statementContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// writeAlone runs fn in one BEGIN IMMEDIATE transaction (the DSN's
// _txlock, see OpenDB), once the path is seen to name the files this
// Backend opened (identity.go). A write that finds the Backend closed,
// before it waits for the write lock or once it holds it, writes nothing.
func (b *Backend) writeAlone(ctx context.Context, op protocol.Op, fn change) (protocol.Result, error) {
	if b.closed.Load() {
		return protocol.Result{}, b.closedError(op) // not waiting behind Close's Lock
	}
	b.alone.RLock() // Close waits for it (see Backend.alone)
	defer b.alone.RUnlock()
	if b.closed.Load() {
		return protocol.Result{}, b.closedError(op)
	}
	if err := b.guard.check(op); err != nil {
		return protocol.Result{}, err
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return protocol.Result{}, b.interpret(ctx, op, err)
	}
	defer func() { _ = tx.Rollback(); b.txEnded(tx) }() // a no-op after Commit
	if b.closed.Load() {
		return protocol.Result{}, b.closedError(op) // Close began while it waited for the lock
	}
	res, commit, err := fn(statementContext(ctx), tx, b.clock())
	if err != nil {
		return protocol.Result{}, b.interpretIn(ctx, op, tx, err)
	}
	if commit {
		if err := tx.Commit(); err != nil {
			return protocol.Result{}, b.interpret(ctx, op, err)
		}
	}
	return res, nil
}

// deadline returns when p's deadline passes: its caller's, or, for a
// caller without one, the batch's (ctx's).
func (p *pendingWrite) deadline(ctx context.Context) time.Time {
	if d, ok := p.ctx.Deadline(); ok {
		return d
	}
	d, _ := ctx.Deadline() // the Coalescer gives every batch one
	return d
}

// expired reports whether p's deadline passed at now, or its caller
// cancelled it, in a batch under ctx.
func (p *pendingWrite) expired(ctx context.Context, now time.Time) bool {
	d := p.deadline(ctx)
	return p.ctx.Err() != nil || (!d.IsZero() && !now.Before(d))
}

// drop leaves p out of its batch, unless its caller did already or the
// batch runs it: it reports whether p is now out.
func (b *Backend) drop(ctx context.Context, p *pendingWrite) bool {
	if p.state.CompareAndSwap(writeQueued, writeDropped) {
		cause := p.ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		p.res, p.err = protocol.Result{}, b.notWritten(ctx, p.op, cause)
		return true
	}
	return p.state.Load() == writeDropped
}

// writeBatch runs batch in one transaction, each write in a savepoint
// (a write alone without one), and answers each write (see Coalescing
// above): it waits for the write lock only until the earliest deadline of
// the writes still in, and leaves out every write whose deadline passed
// before its turn. Each transaction begins once the path is seen to name
// the files this Backend opened (identity.go); else none is written.
func (b *Backend) writeBatch(ctx context.Context, batch []*pendingWrite) {
	live := batch
	for {
		now := time.Now()
		// A copy: the batch's slice belongs to the Coalescer.
		live = slices.DeleteFunc(slices.Clone(live), func(p *pendingWrite) bool {
			return p.state.Load() == writeDropped || (p.expired(ctx, now) && b.drop(ctx, p))
		})
		if len(live) == 0 {
			return
		}
		until := live[0].deadline(ctx)
		for _, p := range live[1:] {
			if d := p.deadline(ctx); d.Before(until) {
				until = d
			}
		}
		if b.closed.Load() {
			for _, p := range live {
				p.res, p.err = protocol.Result{}, b.closedError(p.op)
				p.state.CompareAndSwap(writeQueued, writeAnswered) // else its caller left it out
			}
			return
		}
		if c := b.guard.changed(false); c != nil {
			for _, p := range live {
				p.res, p.err = protocol.Result{}, replacedError(p.op, b.file, c)
				p.state.CompareAndSwap(writeQueued, writeAnswered) // else its caller left it out
			}
			return
		}
		tx, cancel, err := b.beginUntil(ctx, until)
		if errors.Is(err, errBeginCut) || (err != nil && ctx.Err() != nil) {
			continue // the earliest deadline passed: leave those writes out
		}
		if err != nil {
			// Nothing of the batch was written.
			for _, p := range live {
				p.res, p.err = protocol.Result{}, b.interpret(ctx, p.op, err)
				p.state.CompareAndSwap(writeQueued, writeAnswered) // else its caller left it out
			}
			return
		}
		if b.closed.Load() {
			// Close began while the batch waited for the lock: none is
			// written, and each is answered closed above.
			_ = tx.Rollback()
			cancel()
			continue
		}
		b.runBatch(ctx, tx, live)
		cancel()
		return
	}
}

// errBeginCut reports that beginUntil stopped waiting for the write lock
// at its until. It never leaves the package.
var errBeginCut = errors.New("sqlite: the wait for the write lock reached the earliest deadline of the batch")

// beginUntil begins a transaction under ctx (the batch's deadline, which
// the transaction keeps), waiting for the write lock (BEGIN IMMEDIATE)
// only until until: then it gives up with errBeginCut. cancel ends the
// transaction's context once it is over.
func (b *Backend) beginUntil(ctx context.Context, until time.Time) (tx *sql.Tx, cancel context.CancelFunc, err error) {
	txCtx, cancel := context.WithCancel(ctx)
	var (
		mu         sync.Mutex
		begun, cut bool
	)
	if d, ok := ctx.Deadline(); !ok || until.Before(d) {
		t := time.AfterFunc(time.Until(until), func() {
			mu.Lock()
			defer mu.Unlock()
			if !begun {
				cut = true
				cancel()
			}
		})
		defer t.Stop()
	}
	tx, err = b.db.BeginTx(txCtx, nil)
	mu.Lock()
	begun = true
	wasCut := cut
	mu.Unlock()
	if wasCut {
		// Cut as it began, maybe: database/sql rolls back a transaction
		// whose context ended.
		if tx != nil {
			_ = tx.Rollback()
		}
		cancel()
		return nil, nil, errBeginCut
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return tx, cancel, nil
}

// runBatch runs the writes of live in tx, which holds the write lock,
// commits, and answers them.
func (b *Backend) runBatch(ctx context.Context, tx *sql.Tx, live []*pendingWrite) {
	var ran []*pendingWrite // the writes run: claimed for this transaction
	defer func() {
		for _, p := range ran {
			if !p.state.CompareAndSwap(writeClaimed, writeAnswered) && p.after != nil {
				// Its caller left with timeout: the outcome is for after.
				p.afterLeft()
			}
		}
	}()
	defer func() { _ = tx.Rollback(); b.txEnded(tx) }() // a no-op after Commit
	alone := len(live) == 1
	if !alone {
		b.writer.batches.Add(1)
		b.writer.batched.Add(int64(len(live)))
	}
	// fail answers err to the writes of the batch, none of which happened;
	// q reads the schema version (tx while it is open, b.db once it ended).
	fail := func(q rowQuerier, err error, rest []*pendingWrite) {
		for _, p := range ran {
			p.res, p.err = protocol.Result{}, b.interpretIn(ctx, p.op, q, err)
		}
		for _, p := range rest { // not run yet: answered (or left out by their callers)
			p.res, p.err = protocol.Result{}, b.interpretIn(ctx, p.op, q, err)
			p.state.CompareAndSwap(writeQueued, writeAnswered)
		}
	}
	now, sctx := b.clock(), statementContext(ctx)
	commit := false
	for i, p := range live {
		if p.expired(ctx, time.Now()) && b.drop(ctx, p) {
			continue
		}
		if !p.state.CompareAndSwap(writeQueued, writeClaimed) {
			continue // its caller left it out
		}
		ran = append(ran, p)
		if alone {
			res, ok, err := p.fn(sctx, tx, now)
			if err != nil {
				p.err = b.interpretIn(ctx, p.op, tx, err)
				continue
			}
			p.res, commit = res, ok
			continue
		}
		res, ok, err, lost := b.inSavepoint(sctx, tx, func() (protocol.Result, bool, error) { return b.runRecovering(sctx, tx, now, p) })
		if lost != nil {
			fail(tx, lost, live[i+1:])
			if err != nil {
				p.err = b.interpretIn(ctx, p.op, tx, err) // its own error, not the batch's
			}
			if p.panicked != nil {
				p.err = err
			}
			return
		}
		if p.panicked != nil {
			p.err = err // rolled back to its savepoint: it fails alone
			continue
		}
		if err != nil {
			p.err = b.interpretIn(ctx, p.op, tx, err)
			continue
		}
		p.res = res
		commit = commit || ok
	}
	if !commit {
		return // nothing to write: the deferred rollback ends tx
	}
	if err := tx.Commit(); err != nil {
		fail(b.db, err, nil)
	}
}

// afterLeft runs p.after, for a caller that left with timeout, with p's
// outcome, in the batch's goroutine once the batch ended. A panic of
// after is recovered: it has no caller to reach (its own left), and left
// to the batch function it would reach every other caller of the batch
// (backendkit.Coalescer), whose writes committed, and leave the writes
// after p unanswered (TestBatchLeftAfterPanicFailsAlone).
func (p *pendingWrite) afterLeft() {
	defer func() { _ = recover() }()
	_, _ = p.after(p.res, p.err)
}

// runRecovering runs p's change, one write of a batch of several, in tx.
// A panic of the change is recovered into p.panicked and an error saying
// so: the write is rolled back to its savepoint and fails alone, its
// caller panicking with it (writeThen), instead of the batch panicking in
// every caller's goroutine (backendkit.Coalescer) with the other writes,
// which would commit alone, not committed.
func (b *Backend) runRecovering(ctx context.Context, tx *sql.Tx, now time.Time, p *pendingWrite) (res protocol.Result, ok bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			p.panicked = v
			res, ok = protocol.Result{}, false
			err = backendkit.NewError(p.op, protocol.StatusUnavailable, nil,
				"sqlite database %q: the write panicked in its batch (%v) and was rolled back", b.file, v)
		}
	}()
	return p.fn(ctx, tx, now)
}

// inSavepoint runs fn, one write of a transaction that holds others, in
// tx inside a savepoint of its own, rolled back when fn fails or writes
// nothing (ok false) so that the write fails alone, and released. It
// returns fn's answer, and lost when tx cannot go on: then no write of tx
// can be committed. lost is a *rolledBack when fn's error rolled back the
// whole transaction, the savepoint with it (SQLite does so for a trigger's
// RAISE(ROLLBACK), and may for a full disk or an I/O error), else a
// savepoint statement's error. The savepoint statements are prepared ones,
// bound to tx once (Backend.inTx), not parsed again for each write.
func (b *Backend) inSavepoint(ctx context.Context, tx *sql.Tx, fn func() (protocol.Result, bool, error)) (res protocol.Result, ok bool, err, lost error) {
	if _, err := b.inTx(ctx, tx, b.stmts.savepoint).ExecContext(ctx); err != nil {
		return protocol.Result{}, false, nil, err
	}
	res, ok, err = fn()
	if err != nil || !ok {
		if _, rerr := b.inTx(ctx, tx, b.stmts.rollbackSavepoint).ExecContext(ctx); rerr != nil {
			var rb *rolledBack
			switch {
			case err != nil && errors.As(err, &rb): // a write of its own rolled it back (RenewMany)
				return protocol.Result{}, false, err, err
			case err != nil && noSavepoint(rerr):
				return protocol.Result{}, false, err, &rolledBack{err: err}
			}
			return protocol.Result{}, false, err, rerr
		}
	}
	if _, rerr := b.inTx(ctx, tx, b.stmts.releaseSavepoint).ExecContext(ctx); rerr != nil {
		return protocol.Result{}, false, err, rerr
	}
	return res, ok, err, nil
}

// txStatements holds the statements bound to the write transaction that
// runs (tx.StmtContext of the Backend's prepared ones), so that the writes
// of a batch, which share its transaction, bind each statement once
// rather than at every use: binding one allocates a statement, registers
// it with database/sql and closes it with the transaction. Write
// transactions run one at a time (the writer), but the mutex keeps any
// other transaction that asks correct: it rebinds, as before.
type txStatements struct {
	mu    sync.Mutex
	tx    *sql.Tx // the transaction bound holds statements of; nil: none
	bound []boundStmt
}

// boundStmt is st bound to a transaction.
type boundStmt struct{ st, in *sql.Stmt }

// inTx returns st (one of b.stmts) bound to tx, the transaction of a
// write: bound once per transaction. tx keeps it until it ends, as it
// keeps any statement bound to it. (A statement that could not be
// prepared on tx's connection fails each use in tx, as a fresh binding
// would: the write lock keeps the schema as it is until tx ends.)
func (b *Backend) inTx(ctx context.Context, tx *sql.Tx, st *sql.Stmt) *sql.Stmt {
	c := &b.txStmts
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx != tx {
		clear(c.bound)
		c.tx, c.bound = tx, c.bound[:0]
	}
	for _, s := range c.bound {
		if s.st == st {
			return s.in
		}
	}
	in := tx.StmtContext(ctx, st)
	c.bound = append(c.bound, boundStmt{st: st, in: in})
	return in
}

// txEnded forgets the statements bound to tx, which ended (they closed
// with it), so that they are not kept until the next write.
func (b *Backend) txEnded(tx *sql.Tx) {
	c := &b.txStmts
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx == tx {
		clear(c.bound)
		c.tx, c.bound = nil, c.bound[:0]
	}
}

// waitWrites waits for the batches in flight (Close).
func (b *Backend) waitWrites() { b.writer.q.Wait() }
