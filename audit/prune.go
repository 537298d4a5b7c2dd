package audit

import (
	"context"
	"errors"
	"fmt"
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

// PruneRequest asks a store to remove every audit record older than
// Before, but those a live lease needs (see [Pruner]).
type PruneRequest struct {
	Before    time.Time // records with At strictly before it go (but a live lease's, see Pruner); required
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
// same transaction as the last batch. A prune keeps, of the records before
// its cut-off, those that a retry of a change of a lease still live (by the
// store's time when the batch runs) is answered from: the record of the
// acquire that issued the lease's token and that of its latest renew, so
// that a retry whose answer was lost replays rather than answering
// conflict, even after a prune up to the store's time. They go with a
// prune after the lease has ended (each batch reads on past what the
// batches before it kept, so a prune reads each record once: a lease that
// ends during a prune keeps them until the next); Removed counts none of them, and the
// mark of what prunes removed ([CheckPruned]) is the greatest id removed,
// so a reader whose cursor lies before a removed record is refused
// whatever was kept around it. The SQLite, PostgreSQL and etcd backends
// implement it.
// Implementations are safe for concurrent use.
//
// ctx's deadline bounds the whole prune, and a ctx without one gets no
// default, unlike the operations ([protocol.DefaultTimeout]):
// a prune of a trail of millions of records may rightly take minutes, and
// a default cut-off of seconds would stop every such prune part way, each
// run removing a few batches. So a prune called without a deadline waits
// as long as the store does: one whose store stops answering (a PostgreSQL
// lock held by another session, an etcd cluster without quorum) waits
// until ctx ends. Give ctx the deadline the prune may take: leasectl audit
// prune gives an hour, and a call through [protocol.Runtime.Do] gets the
// runtime's default; [Retain] passes its own ctx on.
type Pruner interface {
	PruneAudit(ctx context.Context, r PruneRequest) (PruneResult, error)
}

// ErrPruned is matched (errors.Is) by the error of a read whose cursor
// lies behind a prune: records after the cursor that the read would have
// returned may have been removed by [Pruner.PruneAudit], so paging on from
// it could skip them without a sign. The error's status is unavailable,
// the status of an etcd follower whose revision was compacted, and its
// message begins with [PrunedPrefix] and names the fix: read again from a
// later point (without a cursor, from a time, or from the end of the
// trail). [Watch] and the follow of every backend end with it rather than
// retry.
var ErrPruned = errors.New("the records after the cursor were pruned")

// PrunedPrefix begins the message of an error matching [ErrPruned], so
// that a client of the HTTP API can tell it from other unavailable
// answers.
const PrunedPrefix = "behind a prune: "

// CheckPruned returns the error matching [ErrPruned] for a read of q,
// oldest first from a cursor, when the cursor's id is below through: the
// greatest id a prune removed in q's scope (its namespace's, or the whole
// trail's when q names none). A cursor of id 0 ("a1.0", what [Tail] answers
// for an empty trail) is a position like any other: a reader there has
// read no record, so a prune has removed records it would have read.
// Otherwise, a read without a cursor (the start), newest first, or from a
// cursor at or after through, it returns nil: reading from the start after
// a prune is the ordinary way to read a pruned trail.
//
// A cursor's prune batch ([EncodePrunedCursor]) is not read here: a backend
// that keeps none (SQLite, etcd) refuses such a cursor below through
// as any other; see [CheckPrunedBy].
func CheckPruned(q Query, through int64) error {
	if q.Newest || q.Cursor == "" {
		return nil
	}
	after, err := DecodeCursor(q.Cursor)
	if err != nil || after >= through {
		return nil
	}
	return prunedError(q, through)
}

// CheckPrunedBy is [CheckPruned] for a backend that also marks the last
// prune batch that removed records of the whole trail (PostgreSQL):
// prunedBy is that batch's id, which never repeats, read in the same
// snapshot as through, whatever q's scope. A cursor that carries one
// ([EncodePrunedCursor]) was issued below through to a reader that had
// missed nothing; it is refused only when a batch removed records anywhere
// since, that is when its batch differs from prunedBy (being the whole
// trail's, it never matches a prune of q's scope that its issuer did not
// see, whichever scope issued it). A cursor without one keeps
// [CheckPruned]'s rule.
func CheckPrunedBy(q Query, through, prunedBy int64) error {
	if n, ok := CursorPrunedBy(q.Cursor); ok && !q.Newest && n == prunedBy {
		return nil
	}
	return CheckPruned(q, through)
}

// prunedError is the error matching [ErrPruned] for a read of q from a
// cursor below through.
func prunedError(q Query, through int64) error {
	scope := "the trail"
	if q.Namespace != "" {
		scope = fmt.Sprintf("namespace %q", q.Namespace)
	}
	return &protocol.Error{Op: protocol.OpAudit, Status: protocol.StatusUnavailable, Err: ErrPruned,
		Message: fmt.Sprintf("%scursor %s is behind a prune of the audit trail, which removed records of %s up to id %d "+
			"(leasectl audit prune): reading on from it would skip them. Start again from a later point: "+
			"without a cursor, with --since (since=), or from the end of the trail", PrunedPrefix, q.Cursor, scope, through)}
}
