package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var _ audit.Pruner = (*Backend)(nil)

// pruneBatch is how many records one prune transaction removes (a
// variable for this package's tests).
var pruneBatch int64 = 5000

// PruneAudit removes every audit record older than r.Before, oldest first,
// but those a live lease needs (pruneBatchSQL: the records of a live
// lease's acquire and latest renew, which a retry of either replays from,
// stay; see [audit.Pruner]), pruneBatch records per transaction, each
// batch reading on from the greatest id the one before it took (so a kept
// record is read once a prune, and a lease that ends during the prune
// keeps what it kept until the next prune), and records the prune (see
// [audit.Pruner]). ctx bounds the whole prune; batches that committed
// before it ended stay done, each with a prune record of its own
// written in its transaction (the last batch's carries the request id and
// counts the whole prune). A prune that stops early answers an error and, in the
// result's Removed, the records its committed batches removed; the
// error says how many too (stoppedAfter). A batch that could not delete
// every record it took (a DBA's trigger or row-level security kept some)
// removes none of them and stops the prune (keptRecordsError): it never
// passes a record older than the cut-off, nor takes a short batch for the
// last. Each batch claims the request id for this run before it
// removes anything (pruneClaimSQL): of two prunes with one request id at
// once, one removes records and its record counts them all, and the other
// removes nothing and answers invalid, as a prune whose request id is in
// the trail does (see [backendkit.PruneIDUsed]). A prune that stops early
// frees its claim, so that it can be sent again with its id (dropPruneClaim:
// one whose deadline passes while it waits for another prune's window
// answers then, and a claim it took is freed in the background, which
// [Backend.Close] waits for); a claim left by a prune whose process died
// keeps the id refused as used. A cut-off
// after the server's time is refused (see [backendkit.PruneCutOff]).
//
// A ctx without a deadline gets no default: a long prune may rightly take
// long (see [audit.Pruner]).
func (b *Backend) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	if err := b.callRefusal(audit.OpPrune); err != nil {
		return audit.PruneResult{}, err
	}
	if err := backendkit.CheckPrune(r); err != nil {
		return audit.PruneResult{}, err
	}
	var (
		used bool
		now  time.Time
		err  error
	)
	a := args{"request_id": r.RequestID, "now": b.clock()}
	if err := b.pool.QueryRow(ctx, pruneUsedSQL.sql, pruneUsedSQL.bind(a)...).Scan(&used, &now); err != nil {
		return audit.PruneResult{}, b.interpret(ctx, audit.OpPrune, err)
	}
	if r.Before, err = backendkit.PruneCutOff(r.Before, now); err != nil {
		return audit.PruneResult{}, err
	}
	if used {
		return audit.PruneResult{}, backendkit.PruneIDUsed(r.RequestID)
	}
	run := protocol.RandomRequestID()
	var (
		res audit.PruneResult
		// claimed: a batch of this run asked to commit, so its claim may
		// stand. A batch that failed before (waiting for another prune's
		// window, say) rolled back: this run holds no claim to free.
		claimed bool
		// after is the greatest id the committed batches took: the next
		// batch reads on from it, past the records live leases keep.
		after int64
	)
	stop := func(err error) (audit.PruneResult, error) {
		if errors.Is(err, errPruneIDTaken) {
			return res, backendkit.PruneIDUsed(r.RequestID) // this run took no claim
		}
		if claimed {
			b.dropPruneClaim(ctx, r, run)
		}
		if errors.Is(err, errRequestIDRace) {
			err = backendkit.PruneIDUsed(r.RequestID)
		}
		return res, stoppedAfter(err, r, res.Removed)
	}
	for {
		var (
			n    int64
			rec  *audit.Record
			next int64
		)
		// A batch that failed to serialize rolled back whole: run it again.
		err := retrySerialization(ctx, audit.OpPrune, func() (err error) {
			var committing bool
			n, next, rec, committing, err = b.pruneOnce(ctx, r, run, res.Removed, after)
			claimed = claimed || committing
			if ie := interpretError("", err); errors.Is(ie, errSerialization) {
				return ie
			}
			return err
		})
		var pe *protocol.Error
		switch {
		case errors.Is(err, errAuditWentBack):
			if _, err := b.pool.Exec(ctx, newEraSQL); err != nil {
				return stop(b.interpret(ctx, audit.OpPrune, err))
			}
			continue
		case errors.As(err, &pe), errors.Is(err, errPruneIDTaken):
			// The deadline passed while it kept failing to serialize, the
			// claim was lost, the trail's trigger does not fire, or another
			// run holds the request id.
			return stop(err)
		case err != nil:
			return stop(b.interpret(ctx, audit.OpPrune, err))
		}
		res.Removed += n
		if rec != nil {
			res.Record = *rec
			return res, nil
		}
		after = next
		if b.betweenPruneBatches != nil {
			b.betweenPruneBatches()
		}
	}
}

// pruneTx is every prune transaction's isolation: read committed, whatever
// the session's default (a borrowed pool's, a pooler's). Each statement of
// a batch then reads what committed before it, after the waits before it:
// the claim, after the window's row lock that a prune with the same
// request id holds until it committed its record; under repeatable read
// the claim read the snapshot of the batch's first statement, taken before
// that commit, and a second prune with the id removed a batch that no
// record counted (TestPruneSameRequestIDUnderRepeatableRead).
var pruneTx = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// errPruneIDTaken reports that a prune's first batch found its request id
// claimed by another run, or its record in the trail: the batch rolled
// back, having removed nothing. It never leaves the package.
var errPruneIDTaken = errors.New("postgres: the prune's request id is claimed by another prune, or recorded")

// claimDropTimeout bounds a prune's freeing of its claim when it stops
// early; claimDropGrace bounds how long the prune waits for it past its
// own context's end before it answers, the freeing going on in the
// background (the backend's drops, which Close waits for).
const (
	claimDropTimeout = 5 * time.Second
	claimDropGrace   = 250 * time.Millisecond
)

// dropPruneClaim frees the claim the run holds on r's request id, if any,
// in a transaction of its own, so that a prune that stopped early can be
// sent again with its id. It waits for the window of any other prune, as
// a batch does; it waits for that until ctx ends and claimDropGrace more,
// then lets the freeing go on in the background (see the backend's drops, which
// Close waits for), so that a prune cut off by its deadline answers at
// once. When the freeing fails too (the server is unavailable, the
// Backend closed first) the claim stays, and the id is refused as used. A
// committed row of the window (pruneWindowError) lets it free the claim,
// and stays as it is: it closes only a window it opened.
func (b *Backend) dropPruneClaim(ctx context.Context, r audit.PruneRequest, run string) {
	b.drops.GoAwait(ctx, claimDropGrace, func() { b.unclaimPrune(context.WithoutCancel(ctx), r, run) })
}

// unclaimPrune is the freeing of dropPruneClaim, under ctx and
// claimDropTimeout.
func (b *Backend) unclaimPrune(ctx context.Context, r audit.PruneRequest, run string) {
	dctx, cancel := context.WithTimeout(ctx, claimDropTimeout)
	defer cancel()
	a := args{"before": r.Before, "request_id": r.RequestID, "run": run}
	_ = pgx.BeginTxFunc(dctx, b.pool, pruneTx, func(tx pgx.Tx) error {
		var (
			opened bool
			cutOff *string
		)
		if err := tx.QueryRow(dctx, pruneOpenSQL.sql, pruneOpenSQL.bind(a)...).Scan(&opened, &cutOff); err != nil {
			return err
		}
		if _, err := tx.Exec(dctx, pruneUnclaimSQL.sql, pruneUnclaimSQL.bind(a)...); err != nil {
			return err
		}
		if !opened {
			return nil
		}
		_, err := tx.Exec(dctx, pruneCloseSQL.sql)
		return err
	})
}

// pruneWindowError is the refusal of a prune batch that found a row of
// the prune window committed (see pruneOpenSQL), for records before
// cutOff (nil when the row committed while the batch began): the batch
// rolls back, having removed nothing, and the row stays.
func pruneWindowError(cutOff *string) *protocol.Error {
	c := ""
	if cutOff != nil {
		c = *cutOff
	}
	return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
		"postgres: the prune stopped before removing more: %s: run %s", committedWindow(c), windowFix)
}

// claimLostError is the failure of a prune batch that found the claim on
// its request id, taken by an earlier batch, gone or another's: the batch
// rolls back, and the records the earlier batches removed are counted by
// no record (stoppedAfter says how many).
func claimLostError(r audit.PruneRequest) *protocol.Error {
	return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
		"postgres: the claim of this prune's request id %q (leasestore_audit_prune_claim) was deleted or taken outside "+
			"this prune: prune again with another request id", r.RequestID)
}

// stoppedAfter is err, the failure that stopped the prune r, saying how
// many records (removed) the prune's earlier batches removed for good,
// each batch committed on its own with its prune record (pruneRecord);
// err as it is when they removed none. A prune of many batches cannot be
// all or nothing, so it says how far it got, as the result's Removed
// does.
func stoppedAfter(err error, r audit.PruneRequest, removed int64) error {
	if removed == 0 || err == nil {
		return err
	}
	done := fmt.Sprintf("postgres: the prune removed %d records before %s in batches that committed, each "+
		"recorded by its batch's prune record, and then stopped (send it again to remove the rest)", removed, r.Before.UTC().Format(time.RFC3339Nano))
	pe, ok := err.(*protocol.Error)
	if !ok {
		return backendkit.NewError(audit.OpPrune, protocol.StatusOf(err), err, "%s", done)
	}
	c := *pe
	c.Message = done
	if m := strings.TrimPrefix(pe.Message, "postgres: "); m != "" {
		c.Message += ": " + m
	}
	return &c
}

// keptRecordsError is the refusal of a prune batch that deleted only n of
// the records it took, taken (pruneBatchSQL): triggers, the BEFORE DELETE
// triggers on the trail that are not the store's own, and rls, whether
// row-level security applies to the role on it, say what can have kept
// the others (pruneKeptSQL). The batch rolls back whole: a prune that
// went on would leave records older than its cut-off and take the short
// batch for its last.
func keptRecordsError(n, taken int64, triggers []string, rls bool) *protocol.Error {
	var what, fix []string
	if len(triggers) > 0 {
		noun := "trigger "
		if len(triggers) > 1 {
			noun = "triggers "
		}
		what = append(what, "the BEFORE DELETE "+noun+strings.Join(triggers, ", ")+" on leasestore_audit (a trigger that "+
			"returns NULL keeps its record)")
		for _, t := range triggers {
			fix = append(fix, "DROP TRIGGER "+t+" ON leasestore_audit (or ALTER TABLE leasestore_audit DISABLE TRIGGER "+t+")")
		}
	}
	if rls {
		what = append(what, "row-level security, which applies to the DSN's role on leasestore_audit")
		fix = append(fix, "ALTER TABLE leasestore_audit DISABLE ROW LEVEL SECURITY")
	}
	if len(what) == 0 {
		what = append(what, "a BEFORE DELETE trigger that returns NULL, or a row-level security policy, on leasestore_audit")
		fix = append(fix, "drop or disable it (leasectl health names them)")
	}
	return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
		"postgres: a batch of the prune could delete only %d of the %d oldest records left before its cut-off, so it "+
			"removed none of them: %s kept the rest: run %s, then prune again",
		n, taken, strings.Join(what, ", or "), strings.Join(fix, "; "))
}

// unmarkedPruneError is the refusal of a prune batch while the trigger
// that marks what prunes removed does not fire (see pruneBatchSQL): the
// batch rolls back whole, having removed nothing.
func unmarkedPruneError() *protocol.Error {
	return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
		"postgres: the audit trail's trigger leasestore_audit_keep_pruned does not fire (disabled by ALTER TABLE, "+
			"or kept from firing by session_replication_role), so a prune would leave no mark and a reader behind it "+
			"would skip the removed records silently; the prune stopped before removing more: run ALTER TABLE "+
			"leasestore_audit ENABLE TRIGGER leasestore_audit_keep_pruned (and set session_replication_role to origin)")
}

// pruneOnce runs one batch of the run run, which removed before records
// in its earlier batches, the greatest id they took being after: it takes
// records after it and returns, in next, the greatest id it took. When it
// is the last (fewer than pruneBatch records left), it also frees the
// run's claim and writes the prune's record, and returns it. committing
// reports whether the batch asked to commit: when it did and failed all
// the same, its claim may stand.
func (b *Backend) pruneOnce(ctx context.Context, r audit.PruneRequest, run string, before, after int64) (n, next int64,
	rec *audit.Record, committing bool, err error) {
	err = pgx.BeginTxFunc(ctx, b.pool, pruneTx, func(tx pgx.Tx) error {
		a := args{"before": r.Before, "limit": pruneBatch, "request_id": r.RequestID, "run": run, "actor": r.Actor,
			"now": b.clock(), "after": after}
		var (
			opened bool
			cutOff *string
		)
		if err := tx.QueryRow(ctx, pruneOpenSQL.sql, pruneOpenSQL.bind(a)...).Scan(&opened, &cutOff); err != nil {
			return err
		}
		if !opened {
			return pruneWindowError(cutOff)
		}
		var holder *string
		if err := tx.QueryRow(ctx, pruneClaimSQL.sql, pruneClaimSQL.bind(a)...).Scan(&holder); err != nil {
			return err
		}
		if holder == nil || *holder != run {
			if before == 0 {
				return errPruneIDTaken
			}
			return claimLostError(r)
		}
		var (
			marks bool
			taken int64
		)
		if err := tx.QueryRow(ctx, pruneBatchSQL.sql, pruneBatchSQL.bind(a)...).Scan(&marks, &taken, &n, &next); err != nil {
			return err
		}
		if !marks {
			return unmarkedPruneError()
		}
		if n < taken {
			var (
				triggers []string
				rls      bool
			)
			if err := tx.QueryRow(ctx, pruneKeptSQL.sql).Scan(&triggers, &rls); err != nil {
				return err
			}
			return keptRecordsError(n, taken, triggers, rls)
		}
		last := taken < pruneBatch
		if last {
			if _, err := tx.Exec(ctx, pruneUnclaimSQL.sql, pruneUnclaimSQL.bind(a)...); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, pruneCloseSQL.sql); err != nil {
			return err
		}
		// Every batch writes a prune record, so that what it removes is
		// recorded even if the prune stops after it: the last carries the
		// request id and counts the whole prune; every other a request id
		// of its own (the prune's stays free for a prune sent again after
		// it stopped early), counting the prune so far.
		p := &audit.Record{Op: audit.OpPrune, RequestID: r.RequestID, Actor: r.Actor,
			Reason: backendkit.PruneReason(before+n, r.Before), Status: audit.StatusPruned, Version: audit.RecordFormatVersion}
		if !last {
			p.RequestID, p.Reason = protocol.RandomRequestID(), backendkit.PruneBatchReason(before+n, r)
		}
		a = args{"request_id": p.RequestID, "actor": r.Actor, "reason": p.Reason, "now": b.clock(),
			"record_version": audit.RecordFormatVersion}
		if err := tx.QueryRow(ctx, pruneRecordSQL.sql, pruneRecordSQL.bind(a)...).Scan(&p.ID, &p.At); err != nil {
			return err
		}
		p.At = p.At.UTC()
		if last {
			rec = p
		}
		committing = true
		return nil
	})
	if err != nil {
		if ie := interpretError("", err); errors.Is(ie, errAuditWentBack) {
			return 0, 0, nil, committing, errAuditWentBack
		}
		return 0, 0, nil, committing, err
	}
	return n, next, rec, committing, nil
}
