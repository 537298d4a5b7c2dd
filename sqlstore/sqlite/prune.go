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
// last one (see [audit.Pruner]). A request id already in the trail, or a
// cut-off after the backend's clock (see [backendkit.CheckPruneCutOff]),
// answers invalid.
func (b *Backend) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	if err := backendkit.CheckPrune(r); err != nil {
		return audit.PruneResult{}, err
	}
	if err := backendkit.CheckPruneCutOff(r.Before, b.clock()); err != nil {
		return audit.PruneResult{}, err
	}
	if prior, err := scanRecorded(b.stmts.findRequest.QueryRowContext(ctx, "", r.RequestID)); err == nil && prior.ID != 0 {
		return audit.PruneResult{}, backendkit.PruneIDUsed(r.RequestID)
	}
	var res audit.PruneResult
	for {
		var (
			n   int64
			rec *backendkit.Recorded
		)
		_, err := b.write(ctx, audit.OpPrune, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
			if _, err := tx.ExecContext(ctx, qPruneOpen, micros(r.Before)); err != nil {
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
			// Another prune with this request id may have recorded since the
			// look-up above; the write lock makes this look-up final.
			_, err = scanRecorded(tx.StmtContext(ctx, b.stmts.findRequest).QueryRowContext(ctx, "", r.RequestID))
			if err == nil {
				return protocol.Result{}, false, backendkit.PruneIDUsed(r.RequestID)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return protocol.Result{}, false, err
			}
			reason := fmt.Sprintf("removed %d records before %s", res.Removed+n, r.Before.UTC().Format(time.RFC3339Nano))
			rec = &backendkit.Recorded{Record: audit.Record{At: now, Op: audit.OpPrune, RequestID: r.RequestID, Actor: r.Actor,
				Reason: reason, Status: audit.StatusPruned, Version: audit.RecordFormatVersion}}
			if err := b.record(ctx, tx, *rec); err != nil {
				return protocol.Result{}, false, err
			}
			return protocol.Result{}, true, tx.QueryRowContext(ctx, `SELECT last_insert_rowid()`).Scan(&rec.ID)
		})
		if err != nil {
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
