package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore"
)

// maxAttempts bounds how often a state-changing statement runs for one
// operation. The first run answers almost always, a change that landed
// between its snapshot and its write included (its outcome is then read in
// the newest committed state: see queries.go). A second is needed only
// when a concurrent request had the same request id (its audit insert met
// the id's unique constraint), when an acquire's drawn token was not above
// the token of a key free in that newest state (the sequence behind the
// key: cached, restored), or when a batch could not tell an operation's
// outcome; the run again sees the change. A further run means that
// happened again in that time.
const maxAttempts = 5

// leaseCols receives the six lease columns of a statement; all invalid
// (NULL) when the row is absent. pgtype values scan without allocating.
type leaseCols struct {
	owner      pgtype.Text
	token      pgtype.Int8
	acquiredAt pgtype.Timestamptz
	renewedAt  pgtype.Timestamptz
	expiresAt  pgtype.Timestamptz
	version    pgtype.Int4
	lockDelay  pgtype.Interval
}

func (c *leaseCols) dest() []any {
	return []any{&c.owner, &c.token, &c.acquiredAt, &c.renewedAt, &c.expiresAt, &c.version, &c.lockDelay}
}

// lease returns the row as a lease of key, nil when there is no row, and the
// version error when the row has a format version this release does not
// know.
func (c *leaseCols) lease(op protocol.Op, key protocol.Key) (*protocol.Lease, error) {
	if !c.owner.Valid {
		return nil, nil
	}
	if err := sqlstore.CheckLeaseVersion(op, int(c.version.Int32)); err != nil {
		return nil, err
	}
	return &protocol.Lease{
		Key:        key,
		Owner:      c.owner.String,
		Token:      c.token.Int64,
		AcquiredAt: c.acquiredAt.Time.UTC(),
		RenewedAt:  c.renewedAt.Time.UTC(),
		ExpiresAt:  c.expiresAt.Time.UTC(),
		Version:    int(c.version.Int32),
		LockDelay:  time.Duration(c.lockDelay.Microseconds) * time.Microsecond, // the statements add no days or months
	}, nil
}

// auditCols receives an audit record's columns; all invalid (NULL) in the
// row readAuditSQL returns for an empty page.
type auditCols struct {
	id, token                             pgtype.Int8
	at, expiresAt                         pgtype.Timestamptz
	op, ns, name, owner, requestID, actor pgtype.Text
	reason, status                        pgtype.Text
	version                               pgtype.Int4
}

func (c *auditCols) dest() []any {
	return []any{&c.id, &c.at, &c.op, &c.ns, &c.name, &c.owner, &c.token, &c.requestID, &c.actor, &c.reason,
		&c.status, &c.version, &c.expiresAt}
}

// record returns the row as a record, refusing an unknown format version.
func (c *auditCols) record() (audit.Record, error) {
	if err := sqlstore.CheckRecordVersion("", int(c.version.Int32)); err != nil {
		return audit.Record{}, err
	}
	r := audit.Record{
		ID: c.id.Int64, At: c.at.Time.UTC(), Op: protocol.Op(c.op.String), Namespace: c.ns.String, Key: c.name.String,
		Owner: c.owner.String, Token: c.token.Int64, RequestID: c.requestID.String, Actor: c.actor.String,
		Reason: c.reason.String, Status: protocol.Status(c.status.String), Version: int(c.version.Int32),
	}
	if c.expiresAt.Valid {
		r.ExpiresAt = c.expiresAt.Time.UTC()
	}
	return r, nil
}

// outcomeJSON is leasestore_outcome's answer (see the migration): the audit
// row of the request id, or else the key's lease row; either may be null.
type outcomeJSON struct {
	Prior *struct {
		ID         int64      `json:"id"`
		At         time.Time  `json:"at"`
		Op         string     `json:"op"`
		Namespace  string     `json:"namespace"`
		Name       string     `json:"name"`
		Owner      string     `json:"owner"`
		Token      int64      `json:"token"`
		RequestID  string     `json:"request_id"`
		Actor      string     `json:"actor"`
		Reason     string     `json:"reason"`
		Status     string     `json:"status"`
		Version    int        `json:"version"`
		ParamsHash string     `json:"params_hash"`
		ExpiresAt  *time.Time `json:"expires_at"`
		AcquiredAt *time.Time `json:"acquired_at"`
		RenewedAt  *time.Time `json:"renewed_at"`
		// Since schema version 5: the lease's lock-delay (null when none).
		LockDelayUS *int64 `json:"lock_delay_us"`
	} `json:"prior"`
	Cur *struct {
		Owner      string    `json:"owner"`
		Token      int64     `json:"token"`
		AcquiredAt time.Time `json:"acquired_at"`
		RenewedAt  time.Time `json:"renewed_at"`
		ExpiresAt  time.Time `json:"expires_at"`
		Version    int       `json:"version"`
		Ended      bool      `json:"ended"`
		// Since schema version 4: the lease's lock-delay, and when the
		// lock-delay that keeps the key ends (nil when none does).
		LockDelayUS int64      `json:"lock_delay_us"`
		DelayEnds   *time.Time `json:"delay_ends"`
	} `json:"cur"`
}

// decode fills o.prior or o.cur from the JSON.
func (j *outcomeJSON) decode(op protocol.Op, key protocol.Key, o *outcome) error {
	if p := j.Prior; p != nil {
		o.prior = &backendkit.Recorded{
			Record: audit.Record{
				ID: p.ID, At: p.At.UTC(), Op: protocol.Op(p.Op), Namespace: p.Namespace, Key: p.Name,
				Owner: p.Owner, Token: p.Token, RequestID: p.RequestID, Actor: p.Actor, Reason: p.Reason,
				Status: protocol.Status(p.Status), Version: p.Version,
			},
			ParamsHash: p.ParamsHash,
		}
		if p.ExpiresAt != nil {
			o.prior.ExpiresAt = p.ExpiresAt.UTC()
		}
		if p.AcquiredAt != nil {
			o.prior.AcquiredAt = p.AcquiredAt.UTC()
		}
		if p.RenewedAt != nil {
			o.prior.RenewedAt = p.RenewedAt.UTC()
		}
		if p.LockDelayUS != nil {
			o.prior.LockDelay = time.Duration(*p.LockDelayUS) * time.Microsecond
		}
		return nil
	}
	// A tombstone is no lease, except to an acquire while the lock-delay of
	// the revoke that left it keeps the key: the acquire meets the ended
	// lease, ExpiresAt the time it ended.
	if c := j.Cur; c != nil && (!c.Ended || (op == protocol.OpAcquire && c.DelayEnds != nil)) {
		if err := sqlstore.CheckLeaseVersion(op, c.Version); err != nil {
			return err
		}
		o.cur = &protocol.Lease{
			Key: key, Owner: c.Owner, Token: c.Token, AcquiredAt: c.AcquiredAt.UTC(), RenewedAt: c.RenewedAt.UTC(),
			ExpiresAt: c.ExpiresAt.UTC(), Version: c.Version, LockDelay: time.Duration(c.LockDelayUS) * time.Microsecond,
		}
	}
	return nil
}

// outcome is what a state-changing statement returns (see queries.go).
type outcome struct {
	now   time.Time
	prior *backendkit.Recorded // nothing changed: the audit row of the request id, if any
	cur   *protocol.Lease      // nothing changed and no prior: the key's lease (nil for a tombstone), in the statement's snapshot or, when the write met a later change, the newest committed state
	after *protocol.Lease      // the row as changed (acquire: or as locked by ON CONFLICT)
	fresh pgtype.Int8          // acquire: the token drawn, if one was
}

// change runs one state-changing statement with args
// and classifies its outcome; see maxAttempts for when it runs again.
// classify returns raced=true when the outcome the statement read does not
// tell why its write changed nothing, and only a run with a fresh snapshot
// can.
func (b *Backend) change(ctx context.Context, op protocol.Op, key protocol.Key, st statement, a args,
	classify func(o *outcome) (res protocol.Result, raced bool, err error)) (protocol.Result, error) {
	if err := b.callRefusal(op); err != nil {
		return protocol.Result{}, err
	}
	return b.changeVia(ctx, b.co, op, key, st, a, classify)
}

// changeVia is change whose first attempt goes through co, or alone when
// co is nil.
func (b *Backend) changeVia(ctx context.Context, co *coalescer, op protocol.Op, key protocol.Key, st statement, a args,
	classify func(o *outcome) (res protocol.Result, raced bool, err error)) (protocol.Result, error) {
	for attempt := 1; ; attempt++ {
		var o *outcome
		err := retrySerialization(ctx, op, func() (err error) {
			if attempt == 1 && co != nil {
				o, err = co.do(ctx, &pendingOp{op: op, key: key, st: st, a: a})
			} else {
				o, err = b.runChange(ctx, op, key, st, a)
			}
			return err
		})
		if (errors.Is(err, errRequestIDRace) || errors.Is(err, errRunAlone)) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			if errors.Is(err, errRequestIDRace) {
				err = backendkit.NewError(op, protocol.StatusUnavailable, err,
					"postgres: request id kept racing with concurrent requests; retry")
			}
			return protocol.Result{}, err
		}
		res, raced, err := classify(o)
		if err != nil {
			return protocol.Result{}, err
		}
		if !raced {
			return res, nil
		}
		if attempt == maxAttempts {
			if res.Status != "" {
				return res, nil
			}
			return protocol.Result{}, backendkit.NewError(op, protocol.StatusUnavailable, nil,
				"postgres: the lease changed while the %s ran, %d times in a row; retry with the same request id",
				op, maxAttempts)
		}
	}
}

// retrySerialization runs fn until it returns something other than
// errSerialization, waiting a little longer, with jitter, before each new
// attempt so that transactions that collided do not collide again. When ctx
// ends first, the answer is timeout.
func retrySerialization(ctx context.Context, op protocol.Op, fn func() error) error {
	wait := 500 * time.Microsecond
	for {
		err := fn()
		if !errors.Is(err, errSerialization) {
			return err
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return backendkit.NewError(op, protocol.StatusTimeout, err,
				"postgres: the deadline passed while the statement kept failing to serialize")
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// runChange sends one state-changing statement and reads its one row.
func (b *Backend) runChange(ctx context.Context, op protocol.Op, key protocol.Key, st statement, a args) (*outcome, error) {
	var (
		o     outcome
		row   leaseCols
		extra []byte
	)
	dest := append(append([]any{&o.now}, row.dest()...), &o.fresh, &extra)
	err := b.pool.QueryRow(ctx, st.sql, st.bind(a)...).Scan(dest...)
	if errors.Is(interpretError(op, err), errAuditWentBack) {
		// A move to another cluster: start a new era of audit ids, once,
		// and run the statement again.
		if _, err := b.pool.Exec(ctx, newEraSQL); err != nil {
			return nil, b.interpret(ctx, op, err)
		}
		err = b.pool.QueryRow(ctx, st.sql, st.bind(a)...).Scan(dest...)
	}
	if err != nil {
		return nil, b.interpret(ctx, op, err)
	}
	if err := o.decode(op, key, &row, extra); err != nil {
		return nil, err
	}
	return &o, nil
}

// decode completes o from the statement's lease columns and
// leasestore_outcome's JSON (nil when the change happened).
func (o *outcome) decode(op protocol.Op, key protocol.Key, row *leaseCols, extra []byte) error {
	o.now = o.now.UTC()
	l, err := row.lease(op, key)
	if err != nil {
		return err
	}
	o.after = l
	if extra != nil {
		var j outcomeJSON
		if err := json.Unmarshal(extra, &j); err != nil {
			return inconsistent(op, "leasestore_outcome: %v", err)
		}
		if err := j.decode(op, key, o); err != nil {
			return err
		}
	}
	return nil
}

// args returns the named arguments every state-changing statement takes.
// The fingerprint is stored shortened (backendkit.StoredFingerprint).
func (b *Backend) changeArgs(key protocol.Key, requestID, fingerprint string) args {
	return args{
		"ns": key.Namespace, "name": key.Name, "request_id": requestID,
		"params_hash": backendkit.StoredFingerprint(fingerprint), "now": b.clock(),
		"lease_version": protocol.LeaseFormatVersion, "record_version": audit.RecordFormatVersion,
	}
}

// interval converts a TTL to the interval the statements add to now(), at
// the microsecond precision the server keeps.
func interval(ttl time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: ttl.Microseconds(), Valid: true}
}

// Acquire takes the lease on req.Key when it is free or expired, in one
// statement; see acquireSQL.
func (b *Backend) Acquire(ctx context.Context, req protocol.AcquireRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseAcquire(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpAcquire, req.Key, req.RequestID, &res, &err)
	fp := backendkit.Fingerprint(req)
	a := b.changeArgs(req.Key, req.RequestID, fp)
	a["owner"], a["ttl"], a["lock_delay"] = req.Owner, interval(req.TTL), interval(req.StoredLockDelay())
	return b.change(ctx, protocol.OpAcquire, req.Key, acquireSQL, a, func(o *outcome) (protocol.Result, bool, error) {
		if o.prior != nil {
			res, err := sqlstore.ReplayAcquire(*o.prior, req)
			return res, false, err
		}
		if o.after != nil {
			if !o.fresh.Valid || o.after.Token != o.fresh.Int64 {
				return protocol.Result{}, false, inconsistent(protocol.OpAcquire, "a row came back without the drawn token")
			}
			return protocol.Result{Status: protocol.StatusAcquired, Lease: o.after}, false, nil
		}
		// With a token drawn, the key changed after the snapshot, and o.cur
		// is its newest committed state, judged at o.now, the time the
		// INSERT judged it at (acquireSQL).
		if backendkit.CheckAcquire(o.cur, o.now) == protocol.StatusConflict {
			return backendkit.Conflict(o.cur, o.now), false, nil
		}
		if o.fresh.Valid {
			// Free, yet the drawn token could not take it: the key's token
			// is not below it. A fresh snapshot draws above that token.
			return protocol.Result{}, true, nil
		}
		return protocol.Result{}, false, inconsistent(protocol.OpAcquire, "no row written and none live")
	})
}

// Renew extends the lease (req.Key, req.Owner, req.Token) in one statement.
func (b *Backend) Renew(ctx context.Context, req protocol.RenewRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseRenew(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRenew, req.Key, req.RequestID, &res, &err)
	return b.renewCoalesced(ctx, req)
}

// renewCoalesced is Renew of a valid request, coalesced as any change,
// answering a reused request id in its result (as RenewMany does).
func (b *Backend) renewCoalesced(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	return b.change(ctx, protocol.OpRenew, req.Key, renewSQL, b.renewArgs(req), classifyRenew(req))
}

func (b *Backend) renewArgs(req protocol.RenewRequest) args {
	a := b.changeArgs(req.Key, req.RequestID, backendkit.Fingerprint(req))
	a["owner"], a["token"], a["ttl"] = req.Owner, req.Token, interval(req.TTL)
	return a
}

// classifyRenew reads a renew statement's outcome.
func classifyRenew(req protocol.RenewRequest) func(o *outcome) (protocol.Result, bool, error) {
	return func(o *outcome) (protocol.Result, bool, error) {
		if o.prior != nil {
			res, err := sqlstore.Replay(*o.prior, protocol.OpRenew, backendkit.Fingerprint(req))
			return res, false, err
		}
		if o.after != nil {
			return protocol.Result{Status: protocol.StatusRenewed, Lease: o.after}, false, nil
		}
		if st := backendkit.CheckHolder(o.cur, req.Owner, req.Token, o.now); st != "" {
			return backendkit.Refused(st, o.cur), false, nil
		}
		return protocol.Result{}, true, nil
	}
}

// RenewMany renews reqs in one statement per thousand (the batch function of
// coalescing; see coalesce.go), each in a subtransaction of its own with
// its own audit record, in order, and answers one result per request. A
// renewal the batch could not tell (its key locked by another session, a
// concurrent request with its request id) runs again alone, and so do its
// key's later ones, after it; so does every renewal when the statement
// failed as a whole while the deadline allows. Those runs alone go at once
// for different keys (as many as the pool has connections), one after
// the other for one key, so a key whose lock another session holds until
// the deadline delays no renewal of another key. A renewal
// that got no answer (its statement failed as the deadline passed, or its
// run alone did) answers its error in its result
// ([backendkit.Unanswered]), and the renewals of the statements that
// committed keep theirs. It returns an error (and no results) only when
// no renewal was answered, the first one's (the server unreachable, the
// deadline passed before any answer), as etcd's does. It implements
// [protocol.BulkRenewer].
//
// A batch of more than 64 renewals has more subtransactions than a server
// process keeps in its cache: while it runs (milliseconds for a thousand),
// other sessions' snapshots check its transaction ids in pg_subtrans.
// An invalid request answers invalid in its result, unsent, as the
// runtime answers it ([backendkit.RenewMany]).
func (b *Backend) RenewMany(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	return backendkit.RenewMany(reqs, func(reqs []protocol.RenewRequest) ([]protocol.Result, error) {
		return b.renewValid(ctx, reqs)
	})
}

// renewValid is RenewMany of valid requests.
func (b *Backend) renewValid(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	if err := b.callRefusal(protocol.OpRenew); err != nil {
		return nil, err
	}
	out := make([]protocol.Result, len(reqs))
	errs := make([]error, len(reqs)) // the error of each renewal that got no answer
	for start := 0; start < len(reqs); start += maxRenewBatch {
		end := min(len(reqs), start+maxRenewBatch)
		b.renewMany(ctx, reqs[start:end], out[start:end], errs[start:end])
	}
	for _, err := range errs {
		if err == nil {
			return out, nil
		}
	}
	if len(errs) > 0 {
		return nil, errs[0] // no renewal was answered: the call fails as a whole
	}
	return out, nil
}

// maxRenewBatch bounds the renewals of one statement: each takes its key's
// advisory lock until the statement commits, and the server's lock table
// (max_locks_per_transaction times max_connections) is shared.
const maxRenewBatch = 1000

// renewMany renews reqs in one statement and sets each one's result in
// out, and in errs the error of each that got no answer. When the
// statement failed as a whole as the deadline passed, every renewal
// answers that error.
func (b *Backend) renewMany(ctx context.Context, reqs []protocol.RenewRequest, out []protocol.Result, errs []error) {
	batch := make([]*pendingOp, len(reqs))
	for i, req := range reqs {
		batch[i] = &pendingOp{op: protocol.OpRenew, key: req.Key, st: renewSQL, a: b.renewArgs(req)}
	}
	var err error
	if len(reqs) > 1 && !b.noBatch.Load() {
		err = retrySerialization(ctx, protocol.OpRenew, func() error {
			err := b.sendBatch(ctx, batch)
			if err != nil {
				return b.interpret(ctx, protocol.OpRenew, err)
			}
			return nil
		})
	}
	if err != nil && ctx.Err() != nil {
		for i := range reqs {
			out[i], errs[i] = backendkit.Unanswered(err), err
		}
		return
	}
	again := make([]bool, len(reqs)) // the batch could not tell: it runs again alone
	for i, p := range batch {
		if err == nil && p.err == nil && p.o != nil {
			res, raced, cerr := classifyRenew(reqs[i])(p.o)
			if cerr == nil && !raced {
				out[i] = res
				continue
			}
			if cerr != nil {
				p.err = cerr
			}
		}
		if err == nil && p.err != nil && !errors.Is(p.err, errRunAlone) && !errors.Is(p.err, errRequestIDRace) &&
			!errors.Is(p.err, errSerialization) {
			out[i], errs[i] = backendkit.Unanswered(p.err), p.err
			continue
		}
		again[i] = true
	}
	for i := range batch {
		if again[i] && answeredLater(batch, again, i) {
			// Run again now, it would follow a later renewal of its key. The
			// batch function holds back the later ones of a renewal that
			// failed; this one changed nothing for no reason its outcome
			// tells, which a batch that holds the key's lock never meets.
			again[i] = false
			errs[i] = backendkit.NewError(protocol.OpRenew, protocol.StatusUnavailable, nil,
				"postgres: the batch could not tell this renewal's outcome and renewed a later one of its key; "+
					"retry with the same request id")
			out[i] = backendkit.Unanswered(errs[i])
		}
	}
	var idx []int
	for i := range again {
		if again[i] {
			idx = append(idx, i)
		}
	}
	renew := b.renewAlone
	if len(reqs) == 1 || b.noBatch.Load() {
		renew = b.renewCoalesced // no batch was sent: coalesced as any renewal
	}
	b.renewEach(ctx, reqs, idx, out, errs, renew)
}

// renewAlone renews req as Renew does, its statement sent alone (it runs
// again after a batch).
func (b *Backend) renewAlone(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	return b.changeVia(ctx, nil, protocol.OpRenew, req.Key, renewSQL, b.renewArgs(req), classifyRenew(req))
}

// renewEach renews reqs[i] with renew for each i of idx, setting out[i],
// and errs[i] when it failed. The renewals of different keys run at once,
// at most as many as the pool has connections; those of one key one after
// the other, in order: a key whose lock another session holds delays its
// own later renewals, and no other key's.
func (b *Backend) renewEach(ctx context.Context, reqs []protocol.RenewRequest, idx []int, out []protocol.Result,
	errs []error, renew func(context.Context, protocol.RenewRequest) (protocol.Result, error)) {
	byKey := map[protocol.Key][]int{}
	var keys []protocol.Key
	for _, i := range idx {
		k := reqs[i].Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	sem := make(chan struct{}, max(int(b.pool.Config().MaxConns), 1))
	var wg sync.WaitGroup
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, i := range byKey[k] {
				res, err := renew(ctx, reqs[i])
				if err != nil {
					res, errs[i] = backendkit.Unanswered(err), err
				}
				out[i] = res
			}
		})
	}
	wg.Wait()
}

// answeredLater reports whether a renewal of batch after the i-th, of its
// key, was answered by the batch (again says which were not).
func answeredLater(batch []*pendingOp, again []bool, i int) bool {
	for j := i + 1; j < len(batch); j++ {
		if batch[j].key == batch[i].key && !again[j] {
			return true
		}
	}
	return false
}

// Release deletes the lease (req.Key, req.Owner, req.Token) in one statement.
func (b *Backend) Release(ctx context.Context, req protocol.ReleaseRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseRelease(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRelease, req.Key, req.RequestID, &res, &err)
	fp := backendkit.Fingerprint(req)
	a := b.changeArgs(req.Key, req.RequestID, fp)
	a["owner"], a["token"] = req.Owner, req.Token
	return b.change(ctx, protocol.OpRelease, req.Key, releaseSQL, a, func(o *outcome) (protocol.Result, bool, error) {
		if o.prior != nil {
			res, err := sqlstore.Replay(*o.prior, protocol.OpRelease, fp)
			return res, false, err
		}
		if o.after != nil {
			return protocol.Result{Status: protocol.StatusReleased, Lease: o.after}, false, nil
		}
		if st := backendkit.CheckHolder(o.cur, req.Owner, req.Token, o.now); st != "" {
			return backendkit.Refused(st, o.cur), false, nil
		}
		return protocol.Result{}, true, nil
	})
}

// Revoke deletes the live lease at req.Key (with req.Token when non-zero) in
// one statement, recording req.Actor and req.Reason.
func (b *Backend) Revoke(ctx context.Context, req protocol.RevokeRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseRevoke(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRevoke, req.Key, req.RequestID, &res, &err)
	fp := backendkit.Fingerprint(req)
	a := b.changeArgs(req.Key, req.RequestID, fp)
	a["actor"], a["reason"], a["token"] = req.Actor, req.Reason, req.Token
	return b.change(ctx, protocol.OpRevoke, req.Key, revokeSQL, a, func(o *outcome) (protocol.Result, bool, error) {
		if o.prior != nil {
			res, err := sqlstore.Replay(*o.prior, protocol.OpRevoke, fp)
			return res, false, err
		}
		if o.after != nil {
			return protocol.Result{Status: protocol.StatusRevoked, Lease: o.after}, false, nil
		}
		if st := backendkit.CheckRevoke(o.cur, req.Token, o.now); st != "" {
			return backendkit.Refused(st, o.cur), false, nil
		}
		return protocol.Result{}, true, nil
	})
}

// Get reads the live lease at req.Key; not_found carries the ended lease
// while its lock-delay keeps the key.
func (b *Backend) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseGet(req); err != nil {
		return res, err
	}
	if err := b.callRefusal(protocol.OpGet); err != nil {
		return protocol.Result{}, err
	}
	var (
		now   time.Time
		row   leaseCols
		ended bool
	)
	dest := append(append([]any{&now}, row.dest()...), &ended)
	err := retrySerialization(ctx, protocol.OpGet, func() error {
		return b.interpret(ctx, protocol.OpGet, b.pool.QueryRow(ctx, getSQL.sql,
			getSQL.bind(args{"ns": req.Key.Namespace, "name": req.Key.Name, "now": b.clock()})...).Scan(dest...))
	})
	if err != nil {
		return protocol.Result{}, err
	}
	l, err := row.lease(protocol.OpGet, req.Key)
	if err != nil {
		return protocol.Result{}, err
	}
	if ended {
		return backendkit.Found(nil, l, now), nil // a revoke's tombstone
	}
	return backendkit.Found(l, nil, now), nil
}

// List reads one page of the leases of req.Namespace, ordered by name.
func (b *Backend) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseList(req); err != nil {
		return res, err
	}
	if err := b.callRefusal(protocol.OpList); err != nil {
		return protocol.ListResult{}, err
	}
	after, limit, err := backendkit.ListStart(req)
	if err != nil {
		return protocol.ListResult{}, err
	}
	a := args{"ns": req.Namespace, "prefix": req.Prefix, "after": after, "owner": req.Owner,
		"now": b.clock(), "limit": limit + 1}
	st := listStatement(req)
	var leases []protocol.Lease
	err = retrySerialization(ctx, protocol.OpList, func() error {
		leases = leases[:0]
		rows, err := b.pool.Query(ctx, st.sql, st.bind(a)...)
		if err != nil {
			return b.interpret(ctx, protocol.OpList, err)
		}
		var (
			name string
			cols leaseCols
		)
		dest := append([]any{&name}, cols.dest()...)
		_, err = pgx.ForEachRow(rows, dest, func() error {
			l, err := cols.lease(protocol.OpList, protocol.Key{Namespace: req.Namespace, Name: name})
			if err != nil {
				return err
			}
			leases = append(leases, *l)
			return nil
		})
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			err = b.interpret(ctx, protocol.OpList, err)
		}
		return err
	})
	if err != nil {
		return protocol.ListResult{}, err
	}
	return backendkit.LeasePage(leases, limit), nil
}

// ReadAudit reads one page of the audit trail, oldest first or, with
// q.Newest, newest first. With q.Follow it reads only below the oldest
// transaction in progress (see readAuditSQL), so a follower resuming from
// NextCursor (or FollowCursor, past the records it passed over, never past
// one held back) never skips a record; Page.HeldBack says when committed
// records wait behind it. From a cursor below the greatest id a prune
// removed in q's namespace (or the trail), read in the page's snapshot, it
// fails matching [audit.ErrPruned], unless the cursor carries the id of the
// whole trail's last prune batch and none ran since it was issued (see
// [audit.CheckPrunedBy]): a follower's cursors below that id carry it.
// It implements [audit.Reader].
func (b *Backend) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if err := b.callRefusal(protocol.OpAudit); err != nil {
		return audit.Page{}, err
	}
	if err := q.Validate(); err != nil {
		return audit.Page{}, backendkit.NewError(protocol.OpAudit, protocol.StatusInvalid, err, "audit: bad query")
	}
	afterID, beforeID, _ := q.IDRange() // validated above
	var since *time.Time
	if !q.Since.IsZero() {
		s := q.SinceMicro() // the server keeps microseconds; pgx truncates to them
		since = &s
	}
	limit := q.EffectiveLimit()
	var floor int64 // newest first: the id below which every record is older than since
	if since != nil && (afterID == 0 || q.Newest) {
		// Start at the records of that time, not at the start of the trail
		// (newest first: stop there).
		var start int64
		err := retrySerialization(ctx, protocol.OpAudit, func() error {
			return b.interpret(ctx, protocol.OpAudit, b.pool.QueryRow(ctx, sinceStartSQL.sql,
				sinceStartSQL.bind(args{"since": since, "slack": interval(statementSlack)})...).Scan(&start))
		})
		if err != nil {
			return audit.Page{}, err
		}
		if q.Newest {
			floor = start
		} else {
			afterID = start
		}
	}
	ops := make([]string, len(q.Ops)) // never nil: an empty array is no filter
	for i, o := range q.Ops {
		ops[i] = string(o)
	}
	a := args{"ns": q.Namespace, "since": since, "limit": limit + 1, "ops": ops, "owner": q.Owner}
	var st statement
	switch {
	case q.Newest:
		st, a["before"], a["floor"] = readAuditNewestSQL, beforeID, floor
		if q.Key != "" {
			st = readAuditKeyNewestSQL
		}
	default:
		st, a["after"], a["follow"], a["from_cursor"] = readAuditSQL, afterID, q.Follow, q.Cursor != ""
		if q.Key != "" {
			st = readAuditKeySQL
		}
	}
	if q.Key != "" {
		a["name"] = q.Key
	}
	var (
		recs     []audit.Record
		held     bool
		pruned   int64 // the greatest id a prune removed in q's namespace (from a cursor, or a follower's)
		prunedBy int64 // the id of the last prune batch that removed records of the whole trail (likewise)
		passed   int64 // how far a follower's page passed (readAuditSQL)
		lastID   int64 // the greatest id a record can have had (readAuditSQL; -1: not known)
	)
	err := retrySerialization(ctx, protocol.OpAudit, func() error {
		recs, held, pruned, prunedBy, passed, lastID = recs[:0], false, 0, 0, 0, -1
		rows, err := b.pool.Query(ctx, st.sql, st.bind(a)...)
		if err != nil {
			return b.interpret(ctx, protocol.OpAudit, err)
		}
		var (
			horizon int64
			row     auditCols
			seen    bool // a row came: readAuditSQL returns at least one, unless the era's row is unseen
		)
		dest := append([]any{&horizon, &held, &pruned, &prunedBy, &passed, &lastID}, row.dest()...)
		_, err = pgx.ForEachRow(rows, dest, func() error {
			seen = true
			if !row.id.Valid {
				return nil // the one row of an empty page
			}
			rec, err := row.record()
			if err == nil {
				recs = append(recs, rec)
			}
			return err
		})
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			err = b.interpret(ctx, protocol.OpAudit, err)
		}
		if err == nil && !seen && !q.Newest {
			return errEraRowUnseen(protocol.OpAudit)
		}
		return err
	})
	if err != nil {
		return audit.Page{}, err
	}
	if err := audit.CheckPrunedBy(q, pruned, prunedBy); err != nil {
		return audit.Page{}, err
	}
	if err := audit.CheckCursorEnd(q, lastID); err != nil {
		return audit.Page{}, err
	}
	p := backendkit.FollowPage(recs, q, passed)
	p.HeldBack = q.Follow && held && len(recs) <= limit
	if q.Follow {
		p.NextCursor = markPrunedBy(p.NextCursor, pruned, prunedBy)
		p.FollowCursor = markPrunedBy(p.FollowCursor, pruned, prunedBy)
	}
	return p, nil
}

// markPrunedBy returns a follower's cursor c, issued in a snapshot where
// prunes had removed records of its namespace up to id through and the
// last batch that removed any record of the trail was prunedBy: c itself
// when it lies at or after through, else c carrying prunedBy
// ([audit.EncodePrunedCursor]). A follower's position lies below
// through although it missed nothing when it started after a prune while
// a transaction older than the pruned records was in progress (its
// position is the horizon, below them); reading on from it is refused
// only after another prune ([audit.CheckPrunedBy]), not for this one.
func markPrunedBy(c string, through, prunedBy int64) string {
	id, err := audit.DecodeCursor(c)
	if err != nil || id >= through {
		return c
	}
	return audit.EncodePrunedCursor(id, prunedBy)
}

// listStatement returns the statement that lists what req asks for.
func listStatement(req protocol.ListRequest) statement {
	switch {
	case req.IncludeExpired && req.Owner != "":
		return listOwnerAllSQL
	case req.IncludeExpired:
		return listAllSQL
	case req.Owner != "":
		return listOwnerSQL
	}
	return listSQL
}

var _ protocol.NamespaceLister = (*Backend)(nil)

// Namespaces returns up to limit namespaces holding a live lease, in byte
// order, after after (see [protocol.NamespaceLister]), in one statement.
func (b *Backend) Namespaces(ctx context.Context, after string, limit int) ([]string, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if err := b.callRefusal(protocol.OpNamespaces); err != nil {
		return nil, err
	}
	if err := backendkit.RefuseNamespaces(after, limit); err != nil {
		return nil, err
	}
	var out []string
	err := retrySerialization(ctx, protocol.OpNamespaces, func() error {
		out = out[:0]
		rows, err := b.pool.Query(ctx, namespacesSQL.sql, namespacesSQL.bind(args{"after": after, "now": b.clock(), "limit": limit})...)
		if err != nil {
			return b.interpret(ctx, protocol.OpNamespaces, err)
		}
		defer rows.Close()
		for rows.Next() {
			var ns string
			if err := rows.Scan(&ns); err != nil {
				return b.interpret(ctx, protocol.OpNamespaces, err)
			}
			out = append(out, ns)
		}
		return b.interpret(ctx, protocol.OpNamespaces, rows.Err())
	})
	return out, err
}
