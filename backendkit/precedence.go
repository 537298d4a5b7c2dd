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
// an expired one) and conflict when cur is live at now.
func CheckAcquire(cur *protocol.Lease, now time.Time) protocol.Status {
	if cur != nil && cur.LiveAt(now) {
		return protocol.StatusConflict
	}
	return ""
}

// CheckNamespacesLimit returns an invalid-input error unless limit is
// within 1 and [protocol.MaxListLimit]; a [protocol.NamespaceLister] calls
// it first.
func CheckNamespacesLimit(limit int) error {
	if limit < 1 || limit > protocol.MaxListLimit {
		return NewError(protocol.OpNamespaces, protocol.StatusInvalid, nil, "limit: want 1 to %d, got %d", protocol.MaxListLimit, limit)
	}
	return nil
}
