package audit

import (
	"context"
	"errors"
	"time"

	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/protocol"
)

// OpPrune and StatusPruned mark the record a prune leaves in the trail:
// namespace and key empty, Actor who pruned, Reason how many records went
// and the cut-off.
const (
	OpPrune      protocol.Op     = "prune"
	StatusPruned protocol.Status = "pruned"
)

// PruneRequest asks a store to remove every audit record older than Before.
type PruneRequest struct {
	Before    time.Time // records with At strictly before it go; required
	Actor     string    // who prunes, kept in the prune's record; required
	RequestID string    // the prune record's request id; required
}

// Validate checks r.
func (r PruneRequest) Validate() error {
	var errs []error
	if r.Before.IsZero() {
		errs = append(errs, errors.New("prune: a cut-off time is required"))
	}
	errs = append(errs, textfield.Validate("actor", r.Actor, protocol.MaxOwnerLen),
		textfield.Validate("request id", r.RequestID, protocol.MaxRequestIDLen))
	return errors.Join(errs...)
}

// PruneResult is what a prune did.
type PruneResult struct {
	Removed int64  // how many records went
	Record  Record // the prune's own record, written with the last removal
}

// Pruner removes old records: retention is the only way records leave the
// append-only trail, and each backend lets its database allow the deletion
// only on this path. Records go oldest first, in batches, each its own
// transaction, so a prune of a long trail neither holds locks for long nor
// needs to finish to have freed space; the prune's record is written in the
// same transaction as the last batch. Both SQL backends implement it.
// Implementations are safe for concurrent use.
type Pruner interface {
	PruneAudit(ctx context.Context, r PruneRequest) (PruneResult, error)
}
