package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore"
)

// micros returns t as stored: microseconds since the Unix epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros returns a stored time as a UTC time.Time.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// clock reads the backend's clock at the precision of the database.
func (b *Backend) clock() time.Time { return b.now().Truncate(time.Microsecond).UTC() }

// change is the body of a write transaction: it returns the result and
// whether to commit (false for a replay or a failed condition: nothing was
// written, the transaction is rolled back).
type change func(ctx context.Context, tx *sql.Tx, now time.Time) (res protocol.Result, commit bool, err error)

// replay looks (namespace, requestID) up in the audit trail. done reports
// that the request was answered from it (a replay, or invalid for a reused
// id), which answer gives from the record (sqlstore.Replay or
// ReplayAcquire); the caller then writes nothing.
func (b *Backend) replay(ctx context.Context, tx *sql.Tx, namespace, requestID string,
	answer func(backendkit.Recorded) (protocol.Result, error)) (res protocol.Result, done bool, err error) {
	rec, err := scanRecorded(b.inTx(ctx, tx, b.stmts.findRequest).QueryRowContext(ctx, namespace, requestID))
	if errors.Is(err, sql.ErrNoRows) {
		return protocol.Result{}, false, nil
	}
	if err != nil {
		return protocol.Result{}, false, err
	}
	res, err = answer(rec)
	return res, err == nil, err
}

// current reads the row at key (expired or not; nil when there is none)
// and refuses a row of an unknown format version.
func (b *Backend) current(ctx context.Context, q *sql.Stmt, op protocol.Op, key protocol.Key) (*protocol.Lease, error) {
	l := protocol.Lease{Key: key}
	var acq, ren, exp, delay int64
	err := q.QueryRowContext(ctx, key.Namespace, key.Name).Scan(&l.Owner, &l.Token, &acq, &ren, &exp, &l.Version, &delay)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := sqlstore.CheckLeaseVersion(op, l.Version); err != nil {
		return nil, err
	}
	l.AcquiredAt, l.RenewedAt, l.ExpiresAt = fromMicros(acq), fromMicros(ren), fromMicros(exp)
	l.LockDelay = time.Duration(delay) * time.Microsecond
	return &l, nil
}

// blocking returns what keeps an acquire of key at now from taking it:
// the row's lease while it is live or its lock-delay runs, else the
// revoked lease whose lock-delay runs (leasestore_lock_delays), else the
// row (nil when there is none), which [backendkit.CheckAcquire] then
// finds free.
func (b *Backend) blocking(ctx context.Context, tx *sql.Tx, key protocol.Key, now time.Time) (*protocol.Lease, error) {
	cur, err := b.current(ctx, b.inTx(ctx, tx, b.stmts.currentLease), protocol.OpAcquire, key)
	if err != nil || (cur != nil && now.Before(cur.FreeAt())) {
		return cur, err
	}
	d := protocol.Lease{Key: key, Version: protocol.LeaseFormatVersion}
	var acq, ren, ended, delay int64
	err = b.inTx(ctx, tx, b.stmts.currentDelay).QueryRowContext(ctx, key.Namespace, key.Name, micros(now)).
		Scan(&d.Owner, &d.Token, &acq, &ren, &ended, &delay)
	if errors.Is(err, sql.ErrNoRows) {
		return cur, nil
	}
	if err != nil {
		return nil, err
	}
	d.AcquiredAt, d.RenewedAt, d.ExpiresAt = fromMicros(acq), fromMicros(ren), fromMicros(ended)
	d.LockDelay = time.Duration(delay) * time.Microsecond
	return &d, nil
}

// refused answers a conditional statement that matched no row: a replay
// when its request id (requestID, the request's fingerprint fp) was used,
// else a refusal classified from the row that is there, which the result
// carries (except for not_found). check returns "" when the statement
// should have matched, which the write lock makes impossible: that is
// reported as an error rather than guessed at.
func (b *Backend) refused(ctx context.Context, tx *sql.Tx, op protocol.Op, key protocol.Key, requestID, fp string,
	check func(*protocol.Lease) protocol.Status) (protocol.Result, bool, error) {
	replay := func(rec backendkit.Recorded) (protocol.Result, error) { return sqlstore.Replay(rec, op, fp) }
	if res, done, err := b.replay(ctx, tx, key.Namespace, requestID, replay); done || err != nil {
		return res, false, err
	}
	cur, err := b.current(ctx, b.inTx(ctx, tx, b.stmts.currentLease), op, key)
	if err != nil {
		return protocol.Result{}, false, err
	}
	st := check(cur)
	if st == "" {
		return protocol.Result{}, false, fmt.Errorf("sqlite: %s %s: the conditional statement matched no row, yet the row allows it", op, key)
	}
	return backendkit.Refused(st, cur), false, nil
}

// record appends the audit record of a state change.
func (b *Backend) record(ctx context.Context, tx *sql.Tx, r backendkit.Recorded) error {
	_, err := b.recordID(ctx, tx, r)
	return err
}

// recordID is record, returning the record's id. An INSERT that wrote no
// row (a trigger on the trail dropped it) fails with errRecordMissing: the
// change must not be committed without its record.
func (b *Backend) recordID(ctx context.Context, tx *sql.Tx, r backendkit.Recorded) (int64, error) {
	res, err := b.inTx(ctx, tx, b.stmts.insertAudit).ExecContext(ctx,
		micros(r.At), string(r.Op), r.Namespace, r.Key, r.Owner, r.Token, r.RequestID, r.Actor, r.Reason,
		string(r.Status), r.Version, r.ParamsHash, nullMicros(r.ExpiresAt), nullMicros(r.AcquiredAt),
		nullMicros(r.RenewedAt), sql.NullInt64{Int64: r.LockDelay.Microseconds(), Valid: r.LockDelay > 0})
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if n != 1 {
		return 0, errRecordMissing
	}
	return res.LastInsertId()
}

// nullMicros stores t, or NULL for the zero time.
func nullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(t), Valid: true}
}

// Acquire takes the lease at req.Key when there is no row or only an
// expired one, with a token one above the file's fencing counter, which it
// bumps; a live lease (anyone's) answers conflict with that lease.
func (b *Backend) Acquire(ctx context.Context, req protocol.AcquireRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseAcquire(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpAcquire, req.Key, req.RequestID, &res, &err)
	const op = protocol.OpAcquire
	fp := backendkit.Fingerprint(req)
	return b.write(ctx, op, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		// The lease as the file stores it (microseconds), so that the answer
		// agrees with a get and a replay.
		l := protocol.Lease{Key: req.Key, Owner: req.Owner, AcquiredAt: now, RenewedAt: now,
			ExpiresAt: now.Add(req.TTL).Truncate(time.Microsecond), Version: protocol.LeaseFormatVersion,
			LockDelay: req.StoredLockDelay()}
		err := b.inTx(ctx, tx, b.stmts.acquire).QueryRowContext(ctx, req.Key.Namespace, req.Key.Name, req.Owner,
			micros(now), micros(l.ExpiresAt), protocol.LeaseFormatVersion, l.LockDelay.Microseconds(),
			req.RequestID).Scan(&l.Token)
		if errors.Is(err, sql.ErrNoRows) {
			replay := func(rec backendkit.Recorded) (protocol.Result, error) { return sqlstore.ReplayAcquire(rec, req) }
			if res, done, err := b.replay(ctx, tx, req.Key.Namespace, req.RequestID, replay); done || err != nil {
				return res, false, err
			}
			cur, err := b.blocking(ctx, tx, req.Key, now)
			if err != nil {
				return protocol.Result{}, false, err
			}
			if backendkit.CheckAcquire(cur, now) == "" {
				return protocol.Result{}, false, fmt.Errorf("sqlite: acquire %s: the conditional statement matched no row, yet the key is free", req.Key)
			}
			return backendkit.Conflict(cur, now), false, nil
		}
		if err != nil {
			return protocol.Result{}, false, err
		}
		var last int64
		if err := b.inTx(ctx, tx, b.stmts.bumpFencing).QueryRowContext(ctx).Scan(&last); err != nil {
			return protocol.Result{}, false, err
		}
		if last != l.Token {
			return protocol.Result{}, false, fmt.Errorf("sqlite: acquire %s: fencing counter at %d after issuing token %d", req.Key, last, l.Token)
		}
		rec := backendkit.NewRecorded(now, op, protocol.StatusAcquired, l, req.RequestID, fp, req.Owner, "")
		if err := b.record(ctx, tx, rec); err != nil {
			return protocol.Result{}, false, err
		}
		return protocol.Result{Status: protocol.StatusAcquired, Lease: &l}, true, nil
	})
}

// Renew extends the live lease (req.Key, req.Owner, req.Token) to expire
// req.TTL from now, keeping its token.
func (b *Backend) Renew(ctx context.Context, req protocol.RenewRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseRenew(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRenew, req.Key, req.RequestID, &res, &err)
	return b.write(ctx, protocol.OpRenew, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		return b.renew(ctx, tx, now, req)
	})
}

// RenewMany renews reqs in order in one transaction (one commit, one
// fsync), each with its own audit record, and answers one result per
// request. It implements [protocol.BulkRenewer]. Each renewal runs in a
// savepoint of its own, as a write of a coalesced batch does: one that
// fails (its row of a format version this release does not know, its
// record refused by the database) is rolled back alone and answers as a
// lone Renew would. An error that leaves nothing to commit (the file could
// not be written) fails the whole call, and nothing of it is committed.
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
	const op = protocol.OpRenew
	out := make([]protocol.Result, len(reqs))
	_, err := b.write(ctx, op, func(sctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		commit := false
		for i, req := range reqs {
			res, ok, err, lost := b.inSavepoint(sctx, tx, func() (protocol.Result, bool, error) { return b.renew(sctx, tx, now, req) })
			if lost != nil {
				return protocol.Result{}, false, lost
			}
			if err != nil {
				out[i] = backendkit.Unanswered(b.interpretIn(ctx, op, tx, err))
				continue
			}
			out[i], commit = res, commit || ok
		}
		return protocol.Result{}, commit, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// renew is Renew's transaction body. A refusal writes nothing, so its
// commit flag is false.
func (b *Backend) renew(ctx context.Context, tx *sql.Tx, now time.Time, req protocol.RenewRequest) (protocol.Result, bool, error) {
	const op = protocol.OpRenew
	fp := backendkit.Fingerprint(req)
	l := protocol.Lease{Key: req.Key, Owner: req.Owner, Token: req.Token, RenewedAt: now, Version: protocol.LeaseFormatVersion}
	var acq, exp, delay int64
	var setAside bool
	err := b.inTx(ctx, tx, b.stmts.renew).QueryRowContext(ctx, req.Key.Namespace, req.Key.Name, req.Owner, req.Token,
		micros(now), req.TTL.Microseconds(), protocol.LeaseFormatVersion, req.RequestID).Scan(&acq, &exp, &delay, &setAside)
	if errors.Is(err, sql.ErrNoRows) {
		return b.refused(ctx, tx, op, req.Key, req.RequestID, fp, func(cur *protocol.Lease) protocol.Status {
			return backendkit.CheckHolder(cur, req.Owner, req.Token, now)
		})
	}
	if err != nil {
		return protocol.Result{}, false, err
	}
	if setAside {
		if _, err := b.inTx(ctx, tx, b.stmts.putBack).ExecContext(ctx, req.Key.Namespace, req.Key.Name); err != nil {
			return protocol.Result{}, false, err
		}
	}
	l.AcquiredAt, l.ExpiresAt = fromMicros(acq), fromMicros(exp)
	l.LockDelay = time.Duration(delay) * time.Microsecond
	rec := backendkit.NewRecorded(now, op, protocol.StatusRenewed, l, req.RequestID, fp, req.Owner, "")
	if err := b.record(ctx, tx, rec); err != nil {
		return protocol.Result{}, false, err
	}
	return protocol.Result{Status: protocol.StatusRenewed, Lease: &l}, true, nil
}

// Release deletes the live lease (req.Key, req.Owner, req.Token). The result
// carries the lease as it was.
func (b *Backend) Release(ctx context.Context, req protocol.ReleaseRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseRelease(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRelease, req.Key, req.RequestID, &res, &err)
	const op = protocol.OpRelease
	fp := backendkit.Fingerprint(req)
	var rid int64 // the record the write makes, signalled here, not by the poller
	return b.writeThen(ctx, op, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		l := protocol.Lease{Key: req.Key, Owner: req.Owner, Token: req.Token, Version: protocol.LeaseFormatVersion}
		var acq, ren, exp, delay int64
		err := b.inTx(ctx, tx, b.stmts.release).QueryRowContext(ctx, req.Key.Namespace, req.Key.Name, req.Owner, req.Token,
			micros(now), protocol.LeaseFormatVersion, req.RequestID).Scan(&acq, &ren, &exp, &delay)
		if errors.Is(err, sql.ErrNoRows) {
			return b.refused(ctx, tx, op, req.Key, req.RequestID, fp, func(cur *protocol.Lease) protocol.Status {
				return backendkit.CheckHolder(cur, req.Owner, req.Token, now)
			})
		}
		if err != nil {
			return protocol.Result{}, false, err
		}
		l.AcquiredAt, l.RenewedAt, l.ExpiresAt = fromMicros(acq), fromMicros(ren), fromMicros(exp)
		l.LockDelay = time.Duration(delay) * time.Microsecond
		rec := backendkit.NewRecorded(now, op, protocol.StatusReleased, l, req.RequestID, fp, req.Owner, "")
		id, rerr := b.recordID(ctx, tx, rec)
		if rerr != nil {
			return protocol.Result{}, false, rerr
		}
		rid = id
		b.notify.own(id)
		return protocol.Result{Status: protocol.StatusReleased, Lease: &l}, true, nil
	}, b.woke(req.Key, protocol.StatusReleased, &rid))
}

// Revoke deletes the live lease at req.Key whoever holds it (only the one
// with req.Token when it is non-zero), recording req.Actor and req.Reason.
// The result carries the lease as it was.
func (b *Backend) Revoke(ctx context.Context, req protocol.RevokeRequest) (res protocol.Result, err error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseRevoke(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRevoke, req.Key, req.RequestID, &res, &err)
	const op = protocol.OpRevoke
	fp := backendkit.Fingerprint(req)
	var rid int64 // the record the write makes, signalled here, not by the poller
	return b.writeThen(ctx, op, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		l := protocol.Lease{Key: req.Key, Version: protocol.LeaseFormatVersion}
		var acq, ren, exp, delay int64
		err := b.inTx(ctx, tx, b.stmts.revoke).QueryRowContext(ctx, req.Key.Namespace, req.Key.Name, req.Token,
			micros(now), protocol.LeaseFormatVersion, req.RequestID).Scan(&l.Owner, &l.Token, &acq, &ren, &exp, &delay)
		if errors.Is(err, sql.ErrNoRows) {
			return b.refused(ctx, tx, op, req.Key, req.RequestID, fp, func(cur *protocol.Lease) protocol.Status {
				return backendkit.CheckRevoke(cur, req.Token, now)
			})
		}
		if err != nil {
			return protocol.Result{}, false, err
		}
		l.AcquiredAt, l.RenewedAt, l.ExpiresAt = fromMicros(acq), fromMicros(ren), fromMicros(exp)
		l.LockDelay = time.Duration(delay) * time.Microsecond
		if delay > 0 {
			if _, err := b.inTx(ctx, tx, b.stmts.keepDelay).ExecContext(ctx, req.Key.Namespace, req.Key.Name,
				l.Owner, l.Token, acq, ren, micros(now), delay); err != nil {
				return protocol.Result{}, false, err
			}
		}
		rec := backendkit.NewRecorded(now, op, protocol.StatusRevoked, l, req.RequestID, fp, req.Actor, req.Reason)
		id, rerr := b.recordID(ctx, tx, rec)
		if rerr != nil {
			return protocol.Result{}, false, rerr
		}
		rid = id
		b.notify.own(id)
		return protocol.Result{Status: protocol.StatusRevoked, Lease: &l}, true, nil
	}, b.woke(req.Key, protocol.StatusRevoked, &rid))
}

// woke returns a pass-through of a write's answer (writeThen's after)
// that signals the Backend's waiters of key when the write took effect
// with status st (also when its caller left before its batch ended).
// *rid is the id of the audit record the write made (0 for none), which
// the write marked as its own so that the poller does not signal it again
// once it is known to be committed (notifier.owned); a write that did not
// take effect unmarks it.
func (b *Backend) woke(key protocol.Key, st protocol.Status, rid *int64) func(protocol.Result, error) (protocol.Result, error) {
	return func(res protocol.Result, err error) (protocol.Result, error) {
		if err == nil && res.Status == st && !res.Replayed {
			b.notify.committed(key, *rid)
		} else if *rid != 0 {
			b.notify.forget(*rid)
		}
		return res, err
	}
}

// Get returns the live lease at req.Key (found), or not_found when there is
// none or it expired, carrying the ended lease while its lock-delay keeps
// the key. It reads without taking the write lock, in one statement.
func (b *Backend) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseGet(req); err != nil {
		return res, err
	}
	if err := b.callRefusal(protocol.OpGet); err != nil {
		return protocol.Result{}, err
	}
	now := b.clock()
	cur, ended, err := b.getLease(ctx, req.Key, now)
	if err != nil {
		return protocol.Result{}, b.interpret(ctx, protocol.OpGet, err)
	}
	return backendkit.Found(cur, ended, now), nil
}

// getLease reads (qGetLease) the row at key, expired or not, refusing a
// row of an unknown format version, and the revoked lease whose lock-delay
// keeps key at now; nil for either when there is none.
func (b *Backend) getLease(ctx context.Context, key protocol.Key, now time.Time) (cur, ended *protocol.Lease, err error) {
	rows, err := b.stmts.getLease.QueryContext(ctx, key.Namespace, key.Name, micros(now))
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		l := protocol.Lease{Key: key}
		var kind int
		var acq, ren, exp, delay int64
		if err := rows.Scan(&kind, &l.Owner, &l.Token, &acq, &ren, &exp, &l.Version, &delay); err != nil {
			return nil, nil, err
		}
		l.AcquiredAt, l.RenewedAt, l.ExpiresAt = fromMicros(acq), fromMicros(ren), fromMicros(exp)
		l.LockDelay = time.Duration(delay) * time.Microsecond
		if kind == 1 {
			l.Version = protocol.LeaseFormatVersion
			ended = &l
			continue
		}
		if err := sqlstore.CheckLeaseVersion(protocol.OpGet, l.Version); err != nil {
			return nil, nil, err
		}
		cur = &l
	}
	return cur, ended, rows.Err()
}

// List returns one page of req.Namespace's leases, ordered by name.
func (b *Backend) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if res, err := backendkit.RefuseList(req); err != nil {
		return res, err
	}
	const op = protocol.OpList
	if err := b.callRefusal(op); err != nil {
		return protocol.ListResult{}, err
	}
	now := b.clock()
	after, limit, err := backendkit.ListStart(req)
	if err != nil {
		return protocol.ListResult{}, err
	}
	st, _ := b.listStatement(req)
	rows, err := st.QueryContext(ctx, req.Namespace, after, req.Prefix, prefixUpperBound(req.Prefix),
		micros(now), limit+1, req.Owner)
	if err != nil {
		return protocol.ListResult{}, b.interpret(ctx, op, err)
	}
	defer rows.Close()
	var leases []protocol.Lease
	for rows.Next() {
		l := protocol.Lease{Key: protocol.Key{Namespace: req.Namespace}}
		var acq, ren, exp, delay int64
		if err := rows.Scan(&l.Key.Name, &l.Owner, &l.Token, &acq, &ren, &exp, &l.Version, &delay); err != nil {
			return protocol.ListResult{}, b.interpret(ctx, op, err)
		}
		if err := sqlstore.CheckLeaseVersion(op, l.Version); err != nil {
			return protocol.ListResult{}, err
		}
		l.AcquiredAt, l.RenewedAt, l.ExpiresAt = fromMicros(acq), fromMicros(ren), fromMicros(exp)
		l.LockDelay = time.Duration(delay) * time.Microsecond
		leases = append(leases, l)
	}
	if err := rows.Err(); err != nil {
		return protocol.ListResult{}, b.interpret(ctx, op, err)
	}
	return backendkit.LeasePage(leases, limit), nil
}

// prefixUpperBound returns the smallest string above every string that
// starts with prefix, in SQLite's default BINARY (memcmp) order of UTF-8
// text: prefix followed by the byte 0xFF, which UTF-8 never contains. So
// "name >= prefix AND name < prefixUpperBound(prefix)" selects exactly the
// names with that prefix, as a range on the primary key; for prefix "" it
// selects every name.
func prefixUpperBound(prefix string) string { return prefix + "\xff" }

// ReadAudit returns one page of the audit trail, oldest first or, with
// q.Newest, newest first. Writers are serialized on SQLite, so record ids
// follow commit order and a follower paging by cursor never skips a record;
// a follower's page (q.Follow) sets FollowCursor past the records it passed;
// a cursor below the greatest id a prune removed in q's namespace (or the
// trail) fails, matching [audit.ErrPruned] (see [audit.CheckPruned]).
func (b *Backend) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	const op = protocol.OpAudit
	if err := b.callRefusal(op); err != nil {
		return audit.Page{}, err
	}
	if err := q.Validate(); err != nil {
		return audit.Page{}, backendkit.NewError(op, protocol.StatusInvalid, err, "audit: bad query")
	}
	after, before, _ := q.IDRange() // validated above
	since := int64(math.MinInt64)
	var start int64 // every record at or below it is older than since
	if !q.Since.IsZero() {
		since = micros(q.SinceMicro())
	}
	if !q.Since.IsZero() && (after == 0 || q.Newest) {
		// Start at the records of that time, not at the start of the
		// trail (newest first: stop there). A page from a cursor (each
		// poll of a follower) reads on from it without the search, as on
		// PostgreSQL.
		if err := b.stmts.sinceStart.QueryRowContext(ctx, since-int64(sinceSlack/time.Microsecond)).Scan(&start); err != nil {
			return audit.Page{}, b.interpret(ctx, op, err)
		}
	}
	ops := ""
	if len(q.Ops) > 0 {
		ops = "," + audit.FormatOps(q.Ops) + "," // see qAudit
	}
	limit := q.EffectiveLimit()
	a := []any{max(after, start), q.Namespace, since, limit + 1, before, ops, q.Owner}
	st := b.stmts.audit
	switch {
	case q.Key != "" && q.Newest:
		st, a = b.stmts.auditKeyNewest, append(a, q.Key)
	case q.Key != "":
		st, a = b.stmts.auditKey, append(a, q.Key)
	case q.Newest:
		st = b.stmts.auditNewest
	}
	var top int64 // a follower's page passed every record up to it, read before the page
	if q.Follow && !q.Newest {
		if err := b.stmts.auditTop.QueryRowContext(ctx).Scan(&top); err != nil {
			return audit.Page{}, b.interpret(ctx, op, err)
		}
	}
	rows, err := st.QueryContext(ctx, a...)
	if err != nil {
		return audit.Page{}, b.interpret(ctx, op, err)
	}
	defer rows.Close()
	var recs []audit.Record
	for rows.Next() {
		r, err := scanRecorded(rows)
		if err != nil {
			return audit.Page{}, b.interpret(ctx, op, err)
		}
		if err := sqlstore.CheckRecordVersion(op, r.Version); err != nil {
			return audit.Page{}, err
		}
		recs = append(recs, r.Record)
	}
	if err := rows.Err(); err != nil {
		return audit.Page{}, b.interpret(ctx, op, err)
	}
	if q.Cursor != "" && !q.Newest {
		// Read after the page: a prune that removed records after the
		// cursor (a1.0 included) before the page was read is seen here. One that commits
		// between the two reads fails a page that lost nothing, early.
		var through int64
		if err := b.stmts.prunedThrough.QueryRowContext(ctx, q.Namespace).Scan(&through); err != nil {
			return audit.Page{}, b.interpret(ctx, op, err)
		}
		if err := audit.CheckPruned(q, through); err != nil {
			return audit.Page{}, err
		}
		var end int64
		if err := b.stmts.auditEnd.QueryRowContext(ctx).Scan(&end); err != nil {
			return audit.Page{}, b.interpret(ctx, op, err)
		}
		if err := audit.CheckCursorEnd(q, end); err != nil {
			return audit.Page{}, err
		}
	}
	return backendkit.FollowPage(recs, q, top), nil
}

// scanRecorded scans a row of qFindRequest, qAudit or qAuditKey.
func scanRecorded(row interface{ Scan(...any) error }) (backendkit.Recorded, error) {
	var r backendkit.Recorded
	var at int64
	var op, status string
	var exp, acq, ren, delay sql.NullInt64
	err := row.Scan(&r.ID, &at, &op, &r.Namespace, &r.Key, &r.Owner, &r.Token, &r.RequestID, &r.Actor,
		&r.Reason, &status, &r.Version, &r.ParamsHash, &exp, &acq, &ren, &delay)
	if err != nil {
		return backendkit.Recorded{}, err
	}
	r.At, r.Op, r.Status = fromMicros(at), protocol.Op(op), protocol.Status(status)
	r.LockDelay = time.Duration(delay.Int64) * time.Microsecond // NULL (none, or written before schema 5): 0
	for _, t := range []struct {
		v   sql.NullInt64
		dst *time.Time
	}{{exp, &r.ExpiresAt}, {acq, &r.AcquiredAt}, {ren, &r.RenewedAt}} {
		if t.v.Valid {
			*t.dst = fromMicros(t.v.Int64)
		}
	}
	return r, nil
}

// listStatement returns the prepared statement that lists what req asks
// for, and its text.
func (b *Backend) listStatement(req protocol.ListRequest) (*sql.Stmt, string) {
	switch {
	case req.IncludeExpired:
		return b.stmts.listAll, qListAll
	case req.Owner != "":
		return b.stmts.listOwner, qListOwner
	}
	return b.stmts.list, qList
}

var _ protocol.NamespaceLister = (*Backend)(nil)

// Namespaces returns up to limit namespaces holding a live lease, in byte
// order, after after (see [protocol.NamespaceLister]).
func (b *Backend) Namespaces(ctx context.Context, after string, limit int) ([]string, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if err := backendkit.RefuseNamespaces(after, limit); err != nil {
		return nil, err
	}
	if err := b.callRefusal(protocol.OpNamespaces); err != nil {
		return nil, err
	}
	rows, err := b.db.QueryContext(ctx, qNamespaces, after, micros(b.clock()), limit)
	if err != nil {
		return nil, b.interpret(ctx, protocol.OpNamespaces, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ns string
		if err := rows.Scan(&ns); err != nil {
			return nil, b.interpret(ctx, protocol.OpNamespaces, err)
		}
		out = append(out, ns)
	}
	if err := rows.Err(); err != nil {
		return nil, b.interpret(ctx, protocol.OpNamespaces, err)
	}
	return out, nil
}
