package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/protocol"
)

// Coalescing (group commit). At most [Config.MaxInFlight] state-changing
// round trips of a Backend are in flight at once. An operation that finds a
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
// safe.
//
// A batch runs in a goroutine of the coalescer's, under a deadline of its
// own: the latest of its operations' deadlines, so that no caller's
// deadline or cancellation fails the others. A caller whose context ends
// while it waits gets timeout (its operation may or may not have been
// applied: retry with the same request id to learn it).

// maxBatch bounds the operations of one batch: each is a subtransaction,
// and a transaction with more than 64 subtransactions makes every
// snapshot of the server slower while it runs (the subtransaction cache of
// its process overflows).
const maxBatch = 48

// DefaultMaxInFlight is the default of [Config.MaxInFlight].
const DefaultMaxInFlight = 4

// errRunAlone reports that a batch could not tell an operation's outcome:
// the operation runs again on its own. It never leaves the package.
var errRunAlone = errors.New("postgres: the batch could not apply the operation; it runs alone")

// pendingOp is one operation waiting for, or in, a batch.
type pendingOp struct {
	op       protocol.Op
	key      protocol.Key
	st       statement
	a        args
	deadline time.Time     // the caller's, zero for none
	done     chan struct{} // closed when o and err are set
	o        *outcome
	err      error
}

// coalescer queues state-changing operations and sends them in batches;
// it is safe for concurrent use.
type coalescer struct {
	b     *Backend
	limit int

	mu       sync.Mutex
	inflight int
	queue    []*pendingOp
	wg       sync.WaitGroup // batch goroutines
	batches  int64          // statements of more than one operation sent (tests read it)
	batched  int64          // operations in them
	alone    int64          // operations of batches that ran again alone
}

func newCoalescer(b *Backend, limit int) *coalescer {
	return &coalescer{b: b, limit: limit}
}

// do runs p: at once when a slot is free, else in the next batch.
func (c *coalescer) do(ctx context.Context, p *pendingOp) (*outcome, error) {
	c.mu.Lock()
	if c.inflight < c.limit && len(c.queue) == 0 {
		c.inflight++
		c.mu.Unlock()
		o, err := c.b.runChange(ctx, p.op, p.key, p.st, p.a)
		c.next()
		return o, err
	}
	p.deadline, _ = ctx.Deadline()
	p.done = make(chan struct{})
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.o, p.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	queued := false
	if i := slices.Index(c.queue, p); i >= 0 {
		c.queue = slices.Delete(c.queue, i, i+1)
		queued = true
	}
	c.mu.Unlock()
	if queued {
		return nil, protocol.NewError(p.op, protocol.StatusTimeout, ctx.Err(),
			"postgres: the deadline passed while the operation waited for a connection; it was not sent")
	}
	return nil, protocol.NewError(p.op, protocol.StatusTimeout, ctx.Err(),
		"postgres: the deadline passed while the operation's batch ran")
}

// next frees a slot, or hands it to a batch of the queued operations.
func (c *coalescer) next() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.inflight--
		return
	}
	batch := c.take()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for batch != nil {
			c.run(batch)
			c.mu.Lock()
			if len(c.queue) == 0 {
				c.inflight--
				batch = nil
			} else {
				batch = c.take()
			}
			c.mu.Unlock()
		}
	}()
}

// take removes the next batch from the queue; c.mu is held.
func (c *coalescer) take() []*pendingOp {
	n := min(len(c.queue), maxBatch)
	batch := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	return batch
}

// wait waits for the batches in flight (Close).
func (c *coalescer) wait() { c.wg.Wait() }

// run sends batch and answers each of its operations.
func (c *coalescer) run(batch []*pendingOp) {
	deadline := time.Now().Add(statementTimeout)
	if latest := slices.MaxFunc(batch, func(x, y *pendingOp) int { return x.deadline.Compare(y.deadline) }).deadline; !latest.IsZero() {
		deadline = latest
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	single := len(batch) == 1 || c.b.noBatch.Load()
	var alone int
	if single {
		for _, p := range batch {
			p.o, p.err = c.b.runChange(ctx, p.op, p.key, p.st, p.a)
		}
		return
	}
	c.mu.Lock()
	c.batches++
	c.batched += int64(len(batch))
	c.mu.Unlock()
	err := c.b.sendBatch(ctx, batch)
	alone = 0
	for _, p := range batch {
		if err != nil && p.o == nil && p.err == nil {
			p.err = errRunAlone
		}
		if errors.Is(p.err, errRunAlone) || errors.Is(p.err, errRequestIDRace) {
			alone++
		}
	}
	c.mu.Lock()
	c.alone += int64(alone)
	c.mu.Unlock()
}

// batchArgs returns the arrays changeBatchSQL takes.
func batchArgs(batch []*pendingOp) args {
	n := len(batch)
	var (
		ops, nss, names, owners, rids, hashes, actors, reasons = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		tokens = make([]int64, n)
		ttls   = make([]pgtype.Interval, n)
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
		if p.op == protocol.OpRevoke {
			actors[i], reasons[i] = str(a, "actor"), str(a, "reason")
		} else {
			actors[i] = owners[i]
		}
	}
	first := batch[0].a
	return args{"ops": ops, "nss": nss, "names": names, "owners": owners, "tokens": tokens, "ttls": ttls,
		"request_ids": rids, "params_hashes": hashes, "actors": actors, "reasons": reasons,
		"now": first["now"], "lease_version": first["lease_version"], "record_version": first["record_version"]}
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
		if _, err := conn.Exec(ctx, changeBatchFnSQL); err != nil {
			if errors.As(err, &pe) && pe.Code == "42501" {
				// No TEMP privilege on the database: never batch.
				b.noBatch.Store(true)
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
			if errors.Is(err, errAuditWentBack) {
				err = errRunAlone // alone, it starts a new era
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
