package postgres

import (
	"context"
	"errors"
	"fmt"
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
// pruneBatch records per transaction, and records the prune (see
// [audit.Pruner]). ctx bounds the whole prune; batches that committed
// before it ended stay done, and the prune's record is written only with
// the last batch. A cut-off after the server's time is refused (see
// [backendkit.CheckPruneCutOff]).
func (b *Backend) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	if err := backendkit.CheckPrune(r); err != nil {
		return audit.PruneResult{}, err
	}
	var (
		used bool
		now  time.Time
	)
	a := args{"request_id": r.RequestID, "now": b.clock()}
	if err := b.pool.QueryRow(ctx, pruneUsedSQL.sql, pruneUsedSQL.bind(a)...).Scan(&used, &now); err != nil {
		return audit.PruneResult{}, interpretError("", err)
	}
	if err := backendkit.CheckPruneCutOff(r.Before, now); err != nil {
		return audit.PruneResult{}, err
	}
	if used {
		return audit.PruneResult{}, backendkit.PruneIDUsed(r.RequestID)
	}
	var res audit.PruneResult
	for {
		var (
			n   int64
			rec *audit.Record
		)
		// A batch that failed to serialize rolled back whole: run it again.
		err := retrySerialization(ctx, audit.OpPrune, func() (err error) {
			n, rec, err = b.pruneOnce(ctx, r, res.Removed)
			if ie := interpretError("", err); errors.Is(ie, errSerialization) {
				return ie
			}
			return err
		})
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return res, err // the deadline passed while it kept failing to serialize
		}
		if errors.Is(err, errAuditWentBack) {
			if _, err := b.pool.Exec(ctx, newEraSQL); err != nil {
				return res, interpretError("", err)
			}
			continue
		}
		if errors.Is(interpretError("", err), errRequestIDRace) {
			return res, backendkit.PruneIDUsed(r.RequestID)
		}
		if err != nil {
			return res, interpretError("", err)
		}
		res.Removed += n
		if rec != nil {
			res.Record = *rec
			return res, nil
		}
		if b.betweenPruneBatches != nil {
			b.betweenPruneBatches()
		}
	}
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

// pruneOnce runs one batch; when it is the last (fewer than pruneBatch
// records left), it also writes the prune's record and returns it.
func (b *Backend) pruneOnce(ctx context.Context, r audit.PruneRequest, before int64) (int64, *audit.Record, error) {
	var (
		n   int64
		rec *audit.Record
	)
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		a := args{"before": r.Before, "limit": pruneBatch}
		if _, err := tx.Exec(ctx, pruneOpenSQL.sql, pruneOpenSQL.bind(a)...); err != nil {
			return err
		}
		var marks bool
		if err := tx.QueryRow(ctx, pruneBatchSQL.sql, pruneBatchSQL.bind(a)...).Scan(&marks, &n); err != nil {
			return err
		}
		if !marks {
			return unmarkedPruneError()
		}
		if _, err := tx.Exec(ctx, pruneCloseSQL.sql); err != nil {
			return err
		}
		if n == pruneBatch {
			return nil
		}
		reason := fmt.Sprintf("removed %d records before %s", before+n, r.Before.UTC().Format(time.RFC3339Nano))
		rec = &audit.Record{Op: audit.OpPrune, RequestID: r.RequestID, Actor: r.Actor, Reason: reason,
			Status: audit.StatusPruned, Version: audit.RecordFormatVersion}
		a = args{"request_id": r.RequestID, "actor": r.Actor, "reason": reason, "now": b.clock(),
			"record_version": audit.RecordFormatVersion}
		if err := tx.QueryRow(ctx, pruneRecordSQL.sql, pruneRecordSQL.bind(a)...).Scan(&rec.ID, &rec.At); err != nil {
			return err
		}
		rec.At = rec.At.UTC()
		return nil
	})
	if err != nil {
		if ie := interpretError("", err); errors.Is(ie, errAuditWentBack) {
			return 0, nil, errAuditWentBack
		}
		return 0, nil, err
	}
	return n, rec, nil
}
