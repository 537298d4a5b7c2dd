package backendkit

import (
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// CheckHolder applies DESIGN.md's precedence for renew and release of the
// lease (owner, token) against cur, the key's current row (nil when there is
// none), at the backend's time now. It returns "" when the holder may act,
// and otherwise the status to answer:
//
//	no row                                          -> not_found
//	cur.Token > token                               -> stale_token
//	cur.Token == token and owner differs,
//	  or token > cur.Token                          -> not_owner
//	owner and token match but the lease expired     -> expired
//
// Every backend classifies with this function so the table lives in one place.
func CheckHolder(cur *protocol.Lease, owner string, token int64, now time.Time) protocol.Status {
	switch {
	case cur == nil:
		return protocol.StatusNotFound
	case cur.Token > token:
		return protocol.StatusStaleToken
	case cur.Token < token || cur.Owner != owner:
		return protocol.StatusNotOwner
	case !cur.LiveAt(now):
		return protocol.StatusExpired
	}
	return ""
}

// CheckRevoke applies the precedence for revoke with an optional token (0
// means whatever lease is live) against cur at now. It returns "" when the
// lease may be revoked:
//
//	no row                        -> not_found
//	token != 0 and cur.Token > token -> stale_token
//	token != 0 and token > cur.Token -> not_owner
//	the lease expired             -> not_found
func CheckRevoke(cur *protocol.Lease, token int64, now time.Time) protocol.Status {
	switch {
	case cur == nil:
		return protocol.StatusNotFound
	case token != 0 && cur.Token > token:
		return protocol.StatusStaleToken
	case token != 0 && token > cur.Token:
		return protocol.StatusNotOwner
	case !cur.LiveAt(now):
		return protocol.StatusNotFound
	}
	return ""
}

// CheckAcquire returns "" when a new lease may be taken over cur (no row, or
// an expired one whose lock-delay has passed) and conflict when cur is live
// at now or its lock-delay still keeps the key. cur may also be the ended
// lease of a revoke whose lock-delay a backend keeps, with ExpiresAt the
// time of the revoke.
func CheckAcquire(cur *protocol.Lease, now time.Time) protocol.Status {
	if cur != nil && now.Before(cur.FreeAt()) {
		return protocol.StatusConflict
	}
	return ""
}

// Conflict is the result of an acquire that cur refused at now (see
// [CheckAcquire]): conflict carrying cur, with a message saying when the
// key is free when a lock-delay, not a live lease, keeps it.
func Conflict(cur *protocol.Lease, now time.Time) protocol.Result {
	res := protocol.Result{Status: protocol.StatusConflict, Lease: cur}
	if cur != nil && cur.DelayedAt(now) {
		res.Message = LockDelayMessage(*cur, now)
	}
	return res
}

// LockDelayMessage is the message of a conflict with l, an ended lease
// whose lock-delay keeps the key at now; it starts with
// [protocol.LockDelayPrefix]. It says when the key is free; at or after
// that time (a store that judges the end of a lock-delay late, never
// early, as etcd does) it says instead that the delay ended then and the
// store has not yet freed the key ([protocol.Lease.LockDelayText]).
func LockDelayMessage(l protocol.Lease, now time.Time) string {
	return protocol.LockDelayPrefix + l.LockDelayText(now)
}

// ExpiredMessage is the message of a conflict with l, a lease the store
// still holds live, answered at now: "" while l is live at now (the
// default message says until when it is held); at or after its ExpiresAt
// (a store that sees expiry late, never early, as etcd does) that the
// lease expired then and the store has not yet freed the key
// ([protocol.Lease.ExpiredText]). It never starts with
// [protocol.LockDelayPrefix]: the store's verdict is a live lease. A
// backend that judges expiry by the clock it answers at never needs it.
func ExpiredMessage(l protocol.Lease, now time.Time) string {
	if l.LiveAt(now) {
		return ""
	}
	return l.ExpiredText()
}

// CheckNamespacesLimit returns an invalid-input error unless limit is
// within 1 and [protocol.MaxListLimit]. A [protocol.NamespaceLister] calls
// [RefuseNamespaces], which checks after too.
func CheckNamespacesLimit(limit int) error {
	if limit < 1 || limit > protocol.MaxListLimit {
		return NewError(protocol.OpNamespaces, protocol.StatusInvalid, nil, "limit: want 1 to %d, got %d", protocol.MaxListLimit, limit)
	}
	return nil
}
