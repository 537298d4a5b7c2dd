package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var _ audit.Pruner = (*Backend)(nil)

// pruneBatch is how many records one prune transaction removes (a
// variable for this package's tests).
var pruneBatch int64 = 5000

// PruneAudit removes every audit record older than r.Before, oldest first,
// pruneBatch records per write transaction, and records the prune in the
// last one (see [audit.Pruner]). Each batch claims the request id for this
// run before it removes anything (claimPruneID): of two prunes with one
// request id at once, one removes records and its record counts them all,
// and the other removes nothing and answers invalid, as a prune whose
// request id is in the trail does (see [backendkit.PruneIDUsed]). A prune
// that stops early frees its claim, so that it can be sent again with its
// id; a claim left by a prune whose process died keeps the id refused as
// used. A cut-off after the backend's clock (see
// [backendkit.CheckPruneCutOff]) answers invalid. While a trigger that the
// migrations created is missing or altered (above all
// leasestore_audit_pruned_through, which marks what a prune removed for
// the followers behind it), every batch is refused before it removes
// anything, with unavailable naming the trigger and the fix, as Health
// refuses the file.
func (b *Backend) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	if err := backendkit.CheckPrune(r); err != nil {
		return audit.PruneResult{}, err
	}
	if err := backendkit.CheckPruneCutOff(r.Before, b.clock()); err != nil {
		return audit.PruneResult{}, err
	}
	if err := b.guard.refused(audit.OpPrune); err != nil {
		return audit.PruneResult{}, err
	}
	if prior, err := scanRecorded(b.stmts.findRequest.QueryRowContext(ctx, "", r.RequestID)); err == nil && prior.ID != 0 {
		return audit.PruneResult{}, backendkit.PruneIDUsed(r.RequestID)
	}
	run := protocol.RandomRequestID()
	var res audit.PruneResult
	for {
		var (
			n   int64
			rec *backendkit.Recorded
		)
		_, err := b.write(ctx, audit.OpPrune, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
			// Without its triggers (the mark above all) a batch would leave a
			// follower behind it a silent gap: refused, nothing removed. A
			// row of the window here was committed by another handle (this
			// prune opens and closes its own inside the transaction, and no
			// other write runs beside it): refused too, the row left for
			// the operator to see, not taken over.
			refusal, err := b.storeRefusal(ctx, tx, audit.OpPrune)
			if err != nil {
				return protocol.Result{}, false, err
			}
			if refusal != nil {
				return protocol.Result{}, false, refusal
			}
			if _, err := tx.ExecContext(ctx, qPruneOpen, micros(r.Before)); err != nil {
				return protocol.Result{}, false, err
			}
			if err := b.claimPruneID(ctx, tx, r, run, now, res.Removed); err != nil {
				return protocol.Result{}, false, err
			}
			out, err := tx.ExecContext(ctx, qPruneBatch, micros(r.Before), pruneBatch)
			if err != nil {
				return protocol.Result{}, false, err
			}
			if n, err = out.RowsAffected(); err != nil {
				return protocol.Result{}, false, err
			}
			if _, err := tx.ExecContext(ctx, qPruneClose); err != nil {
				return protocol.Result{}, false, err
			}
			if n == pruneBatch {
				return protocol.Result{}, true, nil
			}
			if _, err := tx.ExecContext(ctx, qPruneUnclaim, r.RequestID, run); err != nil {
				return protocol.Result{}, false, err
			}
			reason := fmt.Sprintf("removed %d records before %s", res.Removed+n, r.Before.UTC().Format(time.RFC3339Nano))
			rec = &backendkit.Recorded{Record: audit.Record{At: now, Op: audit.OpPrune, RequestID: r.RequestID, Actor: r.Actor,
				Reason: reason, Status: audit.StatusPruned, Version: audit.RecordFormatVersion}}
			if rec.ID, err = b.recordID(ctx, tx, *rec); err != nil {
				return protocol.Result{}, false, err
			}
			return protocol.Result{}, true, nil
		})
		if err != nil {
			if !errors.Is(err, protocol.ErrInvalid) { // refused, this run took no claim
				b.dropPruneClaim(ctx, r, run)
			}
			return res, err
		}
		res.Removed += n
		if rec != nil {
			res.Record = rec.Record
			return res, nil
		}
		if b.betweenPruneBatches != nil {
			b.betweenPruneBatches()
		}
	}
}

// claimPruneID claims r's request id for the run run in tx, a batch of the
// prune that removed before records in its earlier batches. The first
// batch finds the id's prune record in the trail, or the id claimed by
// another run: invalid, as a used id. A later batch that finds either has
// lost the claim its first batch took (deleted by hand): unavailable.
// Either way the batch rolls back, having removed nothing.
func (b *Backend) claimPruneID(ctx context.Context, tx *sql.Tx, r audit.PruneRequest, run string, now time.Time, before int64) error {
	holder := ""
	_, err := scanRecorded(tx.StmtContext(ctx, b.stmts.findRequest).QueryRowContext(ctx, "", r.RequestID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, qPruneClaim, r.RequestID, run, r.Actor, micros(r.Before), micros(now)); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, qPruneHolder, r.RequestID).Scan(&holder); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	switch {
	case holder == run:
		return nil
	case before == 0:
		return backendkit.PruneIDUsed(r.RequestID)
	default:
		return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
			"sqlite database %q: the claim of this prune's request id %q (leasestore_audit_prune_claim) was deleted or "+
				"taken outside this prune after it removed %d records; no record counts them: prune again with another request id",
			b.file, r.RequestID, before)
	}
}

// claimDropTimeout bounds a prune's freeing of its claim when it stops
// early.
const claimDropTimeout = 5 * time.Second

// dropPruneClaim frees the claim the run holds on r's request id, if any,
// in a write of its own, so that a prune that stopped early can be sent
// again with its id. When that fails too the claim stays, and the id is
// refused as used.
func (b *Backend) dropPruneClaim(ctx context.Context, r audit.PruneRequest, run string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimDropTimeout)
	defer cancel()
	_, _ = b.write(dctx, audit.OpPrune, func(ctx context.Context, tx *sql.Tx, _ time.Time) (protocol.Result, bool, error) {
		_, err := tx.ExecContext(ctx, qPruneUnclaim, r.RequestID, run)
		return protocol.Result{}, err == nil, err
	})
}
