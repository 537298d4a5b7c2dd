// Package backendkit is the bookkeeping every leasestore backend shares,
// whatever stores its data: the recorded outcome of a state change and its
// replay for a repeated request id, the results of refused changes, of
// get and of a bulk call's unanswered request, where a list page starts,
// keyset-paginated pages, and the queue of coalescing ([Coalescer]). A new
// backend supplies its statements and its error interpretation and calls
// these.
//
// It is for backend authors; users of leasestore meet protocol and audit.
// It depends only on protocol and audit: no database driver, no sqlstore.
// Everything in it is a pure function or a constant, or, like Coalescer,
// safe for concurrent use.
package backendkit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// Recorded is an audit row as the idempotency look-up reads it: the public
// [audit.Record], the fingerprint of the request that wrote it, and the
// lease's other times as the operation answered them.
type Recorded struct {
	audit.Record
	ParamsHash string        // the stored part of the request's [Fingerprint]
	AcquiredAt time.Time     // the lease's acquired_at (zero in records written before schema version 2)
	RenewedAt  time.Time     // the lease's renewed_at (zero in records written before schema version 2)
	LockDelay  time.Duration // the lease's lock-delay (zero in records written before schema version 5)
}

// NewRecorded returns the audit row for a state change that took effect at
// at (the backend's clock): op and status, the lease acted on as the
// operation answers it, the request's id and fingerprint, and actor and
// reason (reason is "" except for revoke). ExpiresAt is the lease's expiry
// after the change (for release and revoke: when it would have expired).
// ID is left zero: the database assigns it.
func NewRecorded(at time.Time, op protocol.Op, status protocol.Status, l protocol.Lease,
	requestID, fingerprint, actor, reason string) Recorded {
	return Recorded{
		Record: audit.Record{
			At: at, Op: op, Namespace: l.Key.Namespace, Key: l.Key.Name, Owner: l.Owner, Token: l.Token,
			RequestID: requestID, Actor: actor, Reason: reason, Status: status, Version: audit.RecordFormatVersion,
			ExpiresAt: l.ExpiresAt,
		},
		ParamsHash: StoredFingerprint(fingerprint),
		AcquiredAt: l.AcquiredAt,
		RenewedAt:  l.RenewedAt,
		LockDelay:  l.LockDelay,
	}
}

// StoredFingerprintLen is how much of a request's fingerprint (64 hex
// digits of SHA-256) a record keeps: 128 bits tell a reused request id
// apart as surely, in half the bytes of every record and index entry.
const StoredFingerprintLen = 32

// StoredFingerprint returns the part of fingerprint a record keeps.
func StoredFingerprint(fingerprint string) string {
	return fingerprint[:min(len(fingerprint), StoredFingerprintLen)]
}

// SameFingerprint reports whether stored, a record's params_hash (whole in
// records of schema version 1, shortened since), is fingerprint's.
func SameFingerprint(stored, fingerprint string) bool {
	return len(stored) >= min(len(fingerprint), StoredFingerprintLen) && strings.HasPrefix(fingerprint, stored)
}

// Replay answers a state-changing request whose (namespace, request id) is
// already in the audit trail as rec. When rec was written by the same
// operation with the same parameters (op and fingerprint match), the result
// is the recorded outcome with Replayed set and the lease as the first
// request answered it. Records written before schema version 2 lack some
// times: acquired_at is then At for acquire and zero otherwise, renewed_at
// At for acquire and renew and zero otherwise, and expires_at zero for
// release and revoke. Records written before schema version 5 (or by a
// release before it) lack the lock-delay: it is then zero ([ReplayAcquire]
// fills a replayed acquire's from the parameters matched). Otherwise the
// result is invalid: the request id was reused with other parameters. An
// acquire is replayed with [ReplayAcquire].
//
// The caller writes nothing in either case. A backend that reads records
// of several format versions refuses unknown ones before it calls Replay.
func Replay(rec Recorded, op protocol.Op, fingerprint string) protocol.Result {
	if rec.Op != op || !SameFingerprint(rec.ParamsHash, fingerprint) {
		return protocol.Result{
			Status: protocol.StatusInvalid,
			Message: fmt.Sprintf("request id %q was already used in namespace %q by an earlier %s of %s with other parameters",
				rec.RequestID, rec.Namespace, rec.Op, protocol.Key{Namespace: rec.Namespace, Name: rec.Key}),
		}
	}
	l := &protocol.Lease{
		Key:        protocol.Key{Namespace: rec.Namespace, Name: rec.Key},
		Owner:      rec.Owner,
		Token:      rec.Token,
		AcquiredAt: rec.AcquiredAt,
		RenewedAt:  rec.RenewedAt,
		ExpiresAt:  rec.ExpiresAt,
		LockDelay:  rec.LockDelay,
		Version:    protocol.LeaseFormatVersion,
	}
	if l.AcquiredAt.IsZero() && op == protocol.OpAcquire {
		l.AcquiredAt = rec.At
	}
	if l.RenewedAt.IsZero() && (op == protocol.OpAcquire || op == protocol.OpRenew) {
		l.RenewedAt = rec.At
	}
	return protocol.Result{Status: rec.Status, Lease: l, Replayed: true}
}

// ReplayAcquire is [Replay] for an acquire req whose request id is in the
// trail as rec. The lock-delay is compared with the lease the first attempt
// got, rec.LockDelay: a retry asking for none (req.LockDelay zero: the
// namespace default, whatever it is now) matches any, one asking for D
// only D. Records written by releases that counted the default in the
// fingerprint (as req.LockDelay) match too: by rec.LockDelay, or, in a
// record written before schema version 5, which lacks it, by
// req.DefaultLockDelay, the default now; such a record's lease is
// answered with the lock-delay the matched fingerprint names.
func ReplayAcquire(rec Recorded, req protocol.AcquireRequest) protocol.Result {
	fp, delay := acquireMatch(rec, req)
	res := Replay(rec, protocol.OpAcquire, fp)
	if res.Replayed && res.Lease.LockDelay == 0 {
		res.Lease.LockDelay = delay
	}
	return res
}

// acquireMatch returns the fingerprint of req, as it asks or as a release
// that counted the lock-delay in would have taken it, that rec's matches,
// with the lock-delay it names (req's own fingerprint when none does).
func acquireMatch(rec Recorded, req protocol.AcquireRequest) (fingerprint string, lockDelay time.Duration) {
	asked := req.LockDelay.Truncate(time.Microsecond)
	fp := Fingerprint(req)
	if SameFingerprint(rec.ParamsHash, fp) {
		return fp, asked
	}
	var alt []time.Duration // the lock-delays to try in req's fingerprint
	if req.LockDelay == 0 {
		alt = []time.Duration{rec.LockDelay, req.DefaultLockDelay}
	} else if rec.LockDelay == asked {
		alt = []time.Duration{0} // the first attempt asked for none and got D
	}
	for _, d := range alt {
		if d == 0 && req.LockDelay == 0 {
			continue // req's own fingerprint
		}
		r := req
		r.LockDelay = d
		if f := Fingerprint(r); SameFingerprint(rec.ParamsHash, f) {
			if d == 0 {
				return f, asked // the lease got D (rec.LockDelay)
			}
			return f, d.Truncate(time.Microsecond)
		}
	}
	return fp, asked
}

// LeasePage turns rows fetched with LIMIT limit+1, ordered by name, into a
// list page: at most limit leases, and a NextCursor resuming after the last
// one only when a further row exists. limit must be positive. The slice is
// reused.
func LeasePage(rows []protocol.Lease, limit int) protocol.ListResult {
	res := protocol.ListResult{Status: protocol.StatusFound, Leases: rows}
	if len(rows) > limit {
		res.Leases = rows[:limit]
		res.NextCursor = EncodeListCursor(rows[limit-1].Key.Name)
	}
	if res.Leases == nil {
		res.Leases = []protocol.Lease{}
	}
	return res
}

// AuditPage is [LeasePage] for the audit records of q fetched with LIMIT
// q.EffectiveLimit()+1, in q's order; the cursor resumes past the last
// record's id in that order ([audit.Query.NextCursor]).
func AuditPage(rows []audit.Record, q audit.Query) audit.Page {
	limit := q.EffectiveLimit()
	p := audit.Page{Records: rows}
	if len(rows) > limit {
		p.Records = rows[:limit]
		p.NextCursor = q.NextCursor(rows[limit-1].ID)
	}
	if p.Records == nil {
		p.Records = []audit.Record{}
	}
	return p
}

// FollowPage is [AuditPage] for a read that passed over every record id
// up to passed, matching q or not, and that no later read can find a
// record at or below (committed or held back). On a follower's page
// (q.Follow, oldest first) it sets FollowCursor: NextCursor on a full
// page, else the cursor after passed, the query's cursor or the last
// record, whichever is latest. Other reads get AuditPage's page.
func FollowPage(rows []audit.Record, q audit.Query, passed int64) audit.Page {
	p := AuditPage(rows, q)
	if !q.Follow || q.Newest {
		return p
	}
	if p.NextCursor != "" {
		p.FollowCursor = p.NextCursor
		return p
	}
	after, _, _ := q.IDRange() // a backend reads only a valid q
	if n := len(p.Records); n > 0 {
		after = max(after, p.Records[n-1].ID)
	}
	p.FollowCursor = audit.EncodeCursor(max(after, passed))
	return p
}

// Refused is the result of a change that the lease at the key refused with
// status st: it carries that lease, except for not_found, which carries
// none (an expired or missing lease is no lease to show).
func Refused(st protocol.Status, cur *protocol.Lease) protocol.Result {
	if st == protocol.StatusNotFound {
		cur = nil
	}
	return protocol.Result{Status: st, Lease: cur}
}

// Unanswered is the result of one request of a bulk call (a
// [protocol.BulkRenewer]'s RenewMany) that the store could not answer
// while the call goes on for the others: its status is err's
// ([protocol.StatusOf]: timeout, unavailable, closed, ...; unavailable for
// a success or a status outside the vocabulary), its message err's text
// without the "lease: OP KEY: STATUS:" head ([protocol.Error.Detail]), as
// a Result's message carries it. The runtime gives the result its key.
func Unanswered(err error) protocol.Result {
	st := protocol.StatusOf(err)
	if !st.Known() || st.Success() {
		st = protocol.StatusUnavailable
	}
	msg := err.Error()
	var e *protocol.Error
	if errors.As(err, &e) {
		msg = e.Detail()
	}
	return protocol.Result{Status: st, Message: msg}
}

// Found is the result of a get at now that read cur, the key's lease (nil
// for no row), and ended, the lease a revoke ended whose lock-delay the
// backend keeps apart from cur (ExpiresAt the time of the revoke; nil for
// none): found with cur while it is live; else, while the lock-delay of
// cur (expired) or of ended keeps the key, not_found carrying that ended
// lease (see [Delayed]); else not_found without a lease. ended is judged by
// its FreeAt alone: it has ended whatever now says.
func Found(cur, ended *protocol.Lease, now time.Time) protocol.Result {
	switch {
	case cur != nil && cur.LiveAt(now):
		return protocol.Result{Status: protocol.StatusFound, Lease: cur}
	case cur != nil && cur.DelayedAt(now):
		return Delayed(cur, now)
	case ended != nil && now.Before(ended.FreeAt()):
		return Delayed(ended, now)
	}
	return protocol.Result{Status: protocol.StatusNotFound}
}

// Delayed is the result of a get at now when no lease is live and the
// lock-delay of ended (ExpiresAt the time it ended) keeps the key:
// not_found, as there is no live lease, carrying the ended lease as an
// acquire's conflict does, with a message saying when the key is free
// (at or after that time, on a store that judges it late, never early,
// that the delay ended then and the store has not yet freed the key).
func Delayed(ended *protocol.Lease, now time.Time) protocol.Result {
	free := ended.FreeAt().UTC().Format(time.RFC3339Nano)
	msg := "no live lease; lock-delay until " + free
	if !now.Before(ended.FreeAt()) {
		msg = "no live lease; the lock-delay ended at " + free + ", but " + protocol.LateLockDelayNote
	}
	return protocol.Result{Status: protocol.StatusNotFound, Lease: ended, Message: fmt.Sprintf(
		"%s (lease of %s, token %d, ended at %s)", msg, ended.Owner, ended.Token, ended.ExpiresAt.UTC().Format(time.RFC3339Nano))}
}

// ListStart returns where a page of req starts: the name to resume after
// ("" for the first page) and the page size. A malformed cursor is an
// *[protocol.Error] with status invalid; the Runtime refuses it before a
// backend sees it.
func ListStart(req protocol.ListRequest) (after string, limit int, err error) {
	if req.Cursor != "" {
		if after, err = DecodeListCursor(req.Cursor); err != nil {
			return "", 0, NewError(protocol.OpList, protocol.StatusInvalid, err, "list: bad cursor")
		}
	}
	return after, req.EffectiveLimit(), nil
}

// CheckPrune refuses, as invalid, a prune request that fails
// [audit.PruneRequest.Validate]; an [audit.Pruner] calls it first.
func CheckPrune(r audit.PruneRequest) error {
	if err := r.Validate(); err != nil {
		return NewError(audit.OpPrune, protocol.StatusInvalid, err, "audit prune: bad request")
	}
	return nil
}

// PruneCutOff returns a prune's cut-off as every store keeps and compares
// its records' times, to the microsecond, and refuses, as invalid, one
// after now, the store's time (the clock its records are stamped by): it
// would remove the records of operations that just committed, and the
// retry of one whose answer was lost would run again instead of
// replaying. Digits below the microsecond (time.Now() taken just before
// the call, which the store read in the same microsecond) neither put the
// cut-off after the store's time nor, once cut, reach a record of that
// microsecond. An [audit.Pruner] calls it with its store's time before
// removing anything, and removes the records before the cut-off it
// returns.
func PruneCutOff(before, now time.Time) (time.Time, error) {
	cut := before.Truncate(time.Microsecond)
	if cut.After(now) {
		return time.Time{}, NewError(audit.OpPrune, protocol.StatusInvalid, nil,
			"audit prune: the cut-off %s is after the store's time %s: give a time in the past",
			before.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	return cut, nil
}

// PruneIDUsed is the refusal of a prune whose request id is already in
// the trail: every prune that removed records has its record, so a repeat
// is refused before anything goes.
func PruneIDUsed(requestID string) error {
	return NewError(audit.OpPrune, protocol.StatusInvalid, nil, "request id %q was already used: give another", requestID)
}

// PruneReason is the reason of a prune's record (the record of its last
// batch): how many records it removed, and before which time.
func PruneReason(removed int64, before time.Time) string {
	return fmt.Sprintf("removed %d records before %s", removed, before.UTC().Format(time.RFC3339Nano))
}

// PruneBatchReason is the reason of the record that a batch of the prune
// r other than its last writes in its transaction (the batches commit one
// by one, so a prune that stops after one has still recorded every record
// it removed): how many records the prune removed so far, counting the
// batch, under a request id of the batch's own, naming r's. The prune's
// later records count these again.
func PruneBatchReason(removed int64, r audit.PruneRequest) string {
	return fmt.Sprintf("removed %d records before %s so far (prune %q; its next batch's record, if any, counts "+
		"these too)", removed, r.Before.UTC().Format(time.RFC3339Nano), r.RequestID)
}
