package protocol

import (
	"errors"
)

// Status is the outcome of an operation. Its string values are part of the
// public contract: the Go API, leasectl's JSON output and the audit trail all
// use exactly these strings.
type Status string

// The status vocabulary. See DESIGN.md for the precise meaning of each.
const (
	StatusAcquired    Status = "acquired"    // acquire took effect
	StatusRenewed     Status = "renewed"     // renew took effect
	StatusReleased    Status = "released"    // release took effect
	StatusRevoked     Status = "revoked"     // revoke took effect
	StatusFound       Status = "found"       // get, list or an audit read answered
	StatusNotFound    Status = "not_found"   // no live lease at that key
	StatusConflict    Status = "conflict"    // acquire: a live lease is held
	StatusStaleToken  Status = "stale_token" // the token is older than the key's current token
	StatusNotOwner    Status = "not_owner"   // the token matches but the owner does not, or the token was never issued
	StatusExpired     Status = "expired"     // the rightful holder's lease expired before it acted
	StatusTimeout     Status = "timeout"     // the deadline passed first; the effect is unknown
	StatusUnavailable Status = "unavailable" // the backend could not be reached or refused service
	StatusClosed      Status = "closed"      // the runtime was closed
	StatusInvalid     Status = "invalid"     // bad input or a reused request id; nothing was written
)

// Statuses lists every status in the vocabulary, in a stable order.
var Statuses = []Status{
	StatusAcquired, StatusRenewed, StatusReleased, StatusRevoked, StatusFound,
	StatusNotFound, StatusConflict, StatusStaleToken, StatusNotOwner, StatusExpired,
	StatusTimeout, StatusUnavailable, StatusClosed, StatusInvalid,
}

// Sentinel errors, one per non-success status, for matching with [errors.Is].
// Every error returned by a [Runtime] operation for a non-success status
// matches exactly one of them.
var (
	ErrNotFound    = errors.New("lease: not found")
	ErrConflict    = errors.New("lease: conflict")
	ErrStaleToken  = errors.New("lease: stale token")
	ErrNotOwner    = errors.New("lease: not owner")
	ErrExpired     = errors.New("lease: expired")
	ErrTimeout     = errors.New("lease: timeout")
	ErrUnavailable = errors.New("lease: unavailable")
	ErrClosed      = errors.New("lease: closed")
	ErrInvalid     = errors.New("lease: invalid")
)

// ErrUnauthenticated and ErrForbidden match the errors of a store that
// refused the caller's credentials, or their permission for the request:
//
//   - ErrUnauthenticated: the credentials were refused: a PostgreSQL DSN's
//     role or password (or pg_hba.conf), an etcd DSN's user or password, a
//     served store's bearer token (HTTP 401);
//   - ErrForbidden: the credentials may not do that: a PostgreSQL role
//     without a privilege on the store's objects, an etcd role without
//     permission on the store's prefix, a bearer token whose role or
//     namespaces do not allow it (HTTP 403).
//
// Such an error has status unavailable (the store did not serve the
// request; it matches [ErrUnavailable] too), but it is no outage: a retry
// is refused the same way until the credentials or the grants are changed,
// so a caller that retries on unavailable should stop on these ([Hold]
// does: a renewal so refused loses the lease). leasectl exits 7 on them,
// never 5. The error's message names what to fix.
var (
	ErrUnauthenticated = errors.New("lease: unauthenticated")
	ErrForbidden       = errors.New("lease: forbidden")
)

// CredentialsRefused reports whether err matches [ErrUnauthenticated] or
// [ErrForbidden]: a refusal of the credentials or their permission, which
// a retry meets again and which applied nothing. [Hold], the scheduler and
// audit.Watch stop on it instead of retrying as for an outage.
func CredentialsRefused(err error) bool {
	return errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden)
}

// ErrRestartRequired is matched (errors.Is) by an unavailable error of a
// backend that refuses every operation until its process restarts, which
// no retry in the same process mends: a SQLite file put back under a
// running backend (sqlite.ErrFileReplaced), an etcd cluster whose revision
// went back. The error's message names the fix. audit.Watch and the
// followers of leasectl (audit --follow, watch) end on it instead of
// retrying (leasectl exits 5, unavailable); [Hold] and the scheduler take
// a renewal so refused as the lease's loss, at once. The HTTP API carries
// it (error_code restart_required), so the HTTP client's errors match it
// too. Backends match it by wrapping it in their cause; protocol knows
// none of them.
var ErrRestartRequired = errors.New("lease: restart required")

// Success reports whether s means that the operation took effect or answered
// (acquired, renewed, released, revoked, found).
func (s Status) Success() bool {
	switch s {
	case StatusAcquired, StatusRenewed, StatusReleased, StatusRevoked, StatusFound:
		return true
	}
	return false
}

// Known reports whether s is one of the vocabulary's statuses.
func (s Status) Known() bool {
	for _, k := range Statuses {
		if s == k {
			return true
		}
	}
	return false
}

// Sentinel returns the sentinel error for a non-success status, or nil for a
// success status or an unknown string.
func (s Status) Sentinel() error {
	switch s {
	case StatusNotFound:
		return ErrNotFound
	case StatusConflict:
		return ErrConflict
	case StatusStaleToken:
		return ErrStaleToken
	case StatusNotOwner:
		return ErrNotOwner
	case StatusExpired:
		return ErrExpired
	case StatusTimeout:
		return ErrTimeout
	case StatusUnavailable:
		return ErrUnavailable
	case StatusClosed:
		return ErrClosed
	case StatusInvalid:
		return ErrInvalid
	}
	return nil
}

// Op names one of the protocol's operations. The values appear in metrics,
// logs and the audit trail.
type Op string

// The eight operations.
const (
	OpAcquire Op = "acquire"
	OpRenew   Op = "renew"
	OpRelease Op = "release"
	OpGet     Op = "get"
	OpList    Op = "list"
	OpRevoke  Op = "revoke"
	OpHealth  Op = "health"
	OpClose   Op = "close"
)

// reads reports whether o only reads (get, list, health, a read of the
// audit trail): such an operation cut off has no effect to learn.
func (o Op) reads() bool {
	switch o {
	case OpGet, OpList, OpHealth, OpAudit:
		return true
	}
	return false
}

// Error is the typed error for every non-success outcome. It carries the
// status, the operation, the key and, for conflict, stale_token and not_owner,
// the lease currently held. It matches the status's sentinel with
// [errors.Is], and unwraps to the underlying cause (a driver error, a context
// error) when there is one.
//
// One rule makes its text: Message says what failed and what to do, and
// names neither the key (Key does) nor the cause (Err does); [Error.Error]
// puts each part once.
type Error struct {
	Op      Op
	Status  Status
	Key     Key    // zero for list, health and close
	Lease   *Lease // the current lease, when the status has one
	Message string // what failed and what to do; never the key or the cause's text
	Err     error  // underlying cause, may be nil
}

// Error implements error: "lease: OP KEY: STATUS: MESSAGE: CAUSE", the
// parts that are empty left out. The text is lowercase and starts with
// "lease:".
func (e *Error) Error() string {
	msg := "lease:"
	if e.Op != "" {
		msg += " " + string(e.Op)
	}
	if e.Key != (Key{}) {
		msg += " " + e.Key.String()
	}
	if e.Op != "" || e.Key != (Key{}) {
		msg += ":"
	}
	msg += " " + string(e.Status)
	if e.Message != "" || e.Err != nil {
		msg += ": " + e.Detail()
	}
	return msg
}

// Detail returns the message and the cause's text, joined by ": " (either
// alone when the other is empty, the status when both are): the error's
// text without its "lease: OP KEY: STATUS: " head, as a [Result]'s
// Message carries it.
func (e *Error) Detail() string {
	switch {
	case e.Err == nil && e.Message == "":
		return string(e.Status)
	case e.Err == nil:
		return e.Message
	case e.Message == "":
		return e.Err.Error()
	}
	return e.Message + ": " + e.Err.Error()
}

// Is reports whether target is the sentinel of e's status.
func (e *Error) Is(target error) bool {
	s := e.Status.Sentinel()
	return s != nil && target == s
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// StatusOf returns the status carried by err: the Status of an *Error in its
// chain, StatusTimeout for context deadline or cancellation, StatusUnavailable
// for any other non-nil error, and "" for nil.
func StatusOf(err error) Status {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	if isContextErr(err) {
		return StatusTimeout
	}
	return StatusUnavailable
}
