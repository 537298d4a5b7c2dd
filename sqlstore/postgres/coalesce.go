package postgres

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// Coalescing (group commit). At most [Config.MaxInFlight] state-changing
// round trips of a Backend are in flight at once (by default a limit that
// follows measured latency), not counting those started over it for a
// queue that waited behind a round trip that overran (a key holding it
// up; see newCoalescer). An operation that finds a
// free slot runs its own statement at once, as if there were no coalescer:
// one caller never waits for anyone. An operation that finds every slot
// taken waits in a queue; when a slot frees, everything queued (up to
// maxBatch operations, in arrival order) goes to the server as one
// statement (changeBatchSQL): one round trip, one commit. Each operation
// in it is still atomic on its own, fenced, audited and idempotent, and
// its error or refusal is its own (see changeBatchFnSQL). An operation
// whose batch could not tell its outcome (the statement failed as a whole,
// or its row changed under it, or a concurrent request had the same
// request id) runs again alone, with its request id, which makes that
// safe. After a batch, its slot waits a moment for the batch's callers'
// next operations (backendkit.Coalescer.Gather), so that callers in a
// loop share round trips instead of taking turns; not once the server
// refused the batch function (then each operation of a batch runs alone,
// and a wait would save no round trip).
//
// A batch runs in a goroutine of the coalescer's, under a deadline of its
// own: the latest of its operations' deadlines, so that no caller's
// deadline or cancellation fails the others. It waits for no key longer
// than a millisecond: an operation whose key another transaction holds (a
// writer, a sweeper, any session's row lock) runs again alone, in its
// caller's goroutine and under its caller's deadline, so a stuck key
// delays no operation on another key (TestStuckKeyDelaysNoOtherKey). A caller whose context ends
// while it waits gets timeout (its operation may or may not have been
// applied: retry with the same request id to learn it).

// maxBatch bounds the operations of one batch: each is a subtransaction,
// and a transaction with more than 64 subtransactions makes every
// snapshot of the server slower while it runs (the subtransaction cache of
// its process overflows).
const maxBatch = 48

// DefaultMaxInFlight is the floor of the adaptive limit of round trips in
// flight when [Config.MaxInFlight] is 0. Two: with batches that gather
// their callers, fewer and fuller batches cost the server less per
// operation, and the limit still grows where round trips do not queue
// (a server with cores to spare). Measured on 2 cores against a floor of
// 4 (docs/benchmarks.md): level at 1, 2 and 8 callers within this
// machine's spread, ahead at 4, 16, 32 and 64.
const DefaultMaxInFlight = 2

// errRunAlone reports that a batch could not tell an operation's outcome:
// the operation runs again on its own. It never leaves the package.
var errRunAlone = errors.New("postgres: the batch could not apply the operation; it runs alone")

// pendingOp is one operation waiting for, or in, a batch.
type pendingOp struct {
	op  protocol.Op
	key protocol.Key
	st  statement
	a   args
	o   *outcome // the answer: set by the batch
	err error
}

// coalescer queues state-changing operations and sends them in batches
// (backendkit.Coalescer); it is safe for concurrent use.
type coalescer struct {
	b *Backend
	q *backendkit.Coalescer[*pendingOp]

	batches atomic.Int64 // statements of more than one operation sent (tests read it)
	batched atomic.Int64 // operations in them
	alone   atomic.Int64 // operations of batches that ran again alone
}

// CoalescingStats is what a Backend's coalescing did since Open (see
// [Backend.Coalescing]).
type CoalescingStats struct {
	// Limit is the current limit of round trips in flight (it adapts
	// unless Config.MaxInFlight fixed it); 0 with Config.NoCoalescing.
	Limit int
	// Batches counts the statements that carried more than one
	// operation, Batched the operations in them; every other operation
	// ran in a statement of its own.
	Batches, Batched int64
	// Alone counts the operations of batches that ran again on their
	// own (their key was busy, their batch failed as a whole, ...).
	Alone int64
}

// Coalescing returns what the backend's coalescing did since Open: for
// monitoring and benchmarks (`bench/peers` prints the mean batch from
// it). Safe for concurrent use; the counters are read one after the
// other, not as one snapshot.
func (b *Backend) Coalescing() CoalescingStats {
	if b.co == nil {
		return CoalescingStats{}
	}
	return CoalescingStats{Limit: b.co.q.Limit(), Batches: b.co.batches.Load(), Batched: b.co.batched.Load(),
		Alone: b.co.alone.Load()}
}

// newCoalescer returns the coalescer of b: at most limit round trips in
// flight, or, with limit 0, a limit that adapts between DefaultMaxInFlight
// and poolSize (backendkit.Coalescer.Adapt). Either way the queue goes in
// a round trip over the limit, within poolSize, once it waited and a round
// trip in flight overran (backendkit.Coalescer.Unstick): slots held by
// operations their keys keep waiting hold no one else up
// (TestStuckSlotsHoldNoOneUp, TestStuckSlotsHoldNoOneUpWithAFixedLimit);
// a fixed limit's queue only with unstick, which only tests turn off.
func newCoalescer(b *Backend, limit, poolSize int, unstick bool) *coalescer {
	c := &coalescer{b: b}
	if limit > 0 {
		c.q = backendkit.NewCoalescer(limit, maxBatch, statementTimeout, c.run)
		if unstick {
			c.q.Unstick(max(poolSize, 1))
		}
	} else {
		c.q = backendkit.NewCoalescer(DefaultMaxInFlight, maxBatch, statementTimeout, c.run)
		c.q.Adapt(max(poolSize, 1))
	}
	c.q.Gather(backendkit.DefaultGatherMax)
	return c
}

// do runs p: at once when a slot is free, else in the next batch.
func (c *coalescer) do(ctx context.Context, p *pendingOp) (*outcome, error) {
	switch c.q.Do(ctx, p, func() { p.o, p.err = c.b.runChange(ctx, p.op, p.key, p.st, p.a) }, false) {
	case backendkit.NotSent:
		return nil, backendkit.NewError(p.op, protocol.StatusTimeout, ctx.Err(),
			"postgres: the deadline passed while the operation waited in the coalescing queue for a round trip to carry it; it was not sent")
	case backendkit.Running:
		return nil, backendkit.NewError(p.op, protocol.StatusTimeout, ctx.Err(),
			"postgres: the deadline passed while the operation's batch ran")
	}
	return p.o, p.err
}

// wait waits for the batches in flight (Close).
func (c *coalescer) wait() { c.q.Wait() }

// run sends batch and answers each of its operations. Without the batch
// function (the server refused it) every operation of a batch of several
// goes back to its caller to run alone, in the caller's goroutine and
// under its deadline, as one whose key is busy does: run here one after
// the other, an operation waiting on its key held up the others
// (TestStuckKeyDelaysNoOtherKeyWithoutTheBatchFunction).
func (c *coalescer) run(ctx context.Context, batch []*pendingOp) {
	switch {
	case len(batch) == 1:
		p := batch[0]
		p.o, p.err = c.b.runChange(ctx, p.op, p.key, p.st, p.a)
		return
	case c.b.noBatch.Load():
		for _, p := range batch {
			p.o, p.err = nil, errRunAlone
		}
		c.alone.Add(int64(len(batch)))
		return
	}
	c.batches.Add(1)
	c.batched.Add(int64(len(batch)))
	err := c.b.sendBatch(ctx, batch)
	for _, p := range batch {
		if err != nil && p.o == nil && p.err == nil {
			p.err = errRunAlone
		}
		if errors.Is(p.err, errRunAlone) || errors.Is(p.err, errRequestIDRace) {
			c.alone.Add(1)
		}
	}
}

// batchArgs returns the arrays changeBatchSQL takes.
func batchArgs(batch []*pendingOp) args {
	n := len(batch)
	var (
		ops, nss, names, owners, rids, hashes, actors, reasons = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		tokens = make([]int64, n)
		ttls   = make([]pgtype.Interval, n)
		delays = make([]pgtype.Interval, n)
	)
	str := func(a args, k string) string { s, _ := a[k].(string); return s }
	for i, p := range batch {
		a := p.a
		ops[i], nss[i], names[i], rids[i], hashes[i] = string(p.op), str(a, "ns"), str(a, "name"), str(a, "request_id"), str(a, "params_hash")
		owners[i] = str(a, "owner")
		tokens[i], _ = a["token"].(int64)
		if ttl, ok := a["ttl"].(pgtype.Interval); ok {
			ttls[i] = ttl
		} else {
			ttls[i] = pgtype.Interval{Valid: true}
		}
		if d, ok := a["lock_delay"].(pgtype.Interval); ok {
			delays[i] = d
		} else {
			delays[i] = pgtype.Interval{Valid: true}
		}
		if p.op == protocol.OpRevoke {
			actors[i], reasons[i] = str(a, "actor"), str(a, "reason")
		} else {
			actors[i] = owners[i]
		}
	}
	first := batch[0].a
	return args{"ops": ops, "nss": nss, "names": names, "owners": owners, "tokens": tokens, "ttls": ttls,
		"request_ids": rids, "params_hashes": hashes, "actors": actors, "reasons": reasons,
		"now": first["now"], "lease_version": first["lease_version"], "record_version": first["record_version"],
		"lock_delays": delays}
}

// sendBatch sends the batch on one connection (creating the batch function
// there first if that connection has not got it yet) and sets each
// operation's outcome or error. An error return means the statement failed
// as a whole: nothing of it was applied, unless the connection broke after
// the commit, which a run alone with the same request id finds out.
func (b *Backend) sendBatch(ctx context.Context, batch []*pendingOp) error {
	for _, p := range batch {
		p.o, p.err = nil, nil
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	bound := changeBatchSQL.bind(batchArgs(batch))
	err = queryBatch(ctx, conn, batch, bound)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42883" || pe.Code == "3F000") {
		// The function is made per connection (a temporary object); a
		// session that has none has no pg_temp schema yet either (3F000).
		fnSQL := changeBatchFnSQL
		if b.testBatchFnSQL != "" {
			fnSQL = b.testBatchFnSQL
		}
		if _, err := conn.Exec(ctx, fnSQL); err != nil {
			if errors.As(err, &pe) && pe.Code == "42501" {
				// No TEMP privilege on the database: never batch, and
				// never gather (operations run alone, so a wait for
				// the callers saves no round trip).
				b.noBatch.Store(true)
				if b.co != nil { // nil: a bulk renew without coalescing
					b.co.q.Gather(0)
				}
			}
			return err
		}
		err = queryBatch(ctx, conn, batch, bound)
	}
	return err
}

// queryBatch runs the batch statement and reads one row per operation.
func queryBatch(ctx context.Context, conn *pgxpool.Conn, batch []*pendingOp, bound []any) error {
	rows, err := conn.Query(ctx, changeBatchSQL.sql, bound...)
	if err != nil {
		return err
	}
	defer rows.Close()
	type result struct {
		o   outcome
		row leaseCols
		js  []byte
		pe  *pgconn.PgError
	}
	results := make([]result, 0, len(batch))
	for rows.Next() {
		var (
			r                    result
			state, msg, constrnt pgtype.Text
		)
		dest := append(append([]any{&r.o.now}, r.row.dest()...), &r.o.fresh, &r.js, &state, &msg, &constrnt)
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if state.Valid {
			r.pe = &pgconn.PgError{Severity: "ERROR", Code: state.String, Message: msg.String, ConstraintName: constrnt.String}
		}
		results = append(results, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(results) != len(batch) {
		return inconsistent("", "the batch answered %d rows for %d operations", len(results), len(batch))
	}
	for i, p := range batch {
		r := &results[i]
		if r.pe != nil {
			err := interpretError(p.op, r.pe)
			if errors.Is(err, errAuditWentBack) || errors.Is(err, errKeyBusy) || missingSchemaObject(r.pe) {
				// alone, it starts a new era, waits for the key under its own
				// deadline, or names the schema's version (Backend.interpret)
				err = errRunAlone
			}
			p.err = err
			continue
		}
		o := r.o
		if err := o.decode(p.op, p.key, &r.row, r.js); err != nil {
			p.err = err
			continue
		}
		p.o = &o
	}
	return nil
}
