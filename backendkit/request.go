package backendkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/leasestore/leasestore/internal/listcursor"
	"github.com/leasestore/leasestore/protocol"
)

// Change is a state-changing request: what [Fingerprint] hashes.
type Change interface {
	protocol.AcquireRequest | protocol.RenewRequest | protocol.ReleaseRequest | protocol.RevokeRequest
}

// Fingerprint returns a hash (64 hex digits) of a state-changing request's
// parameters, everything but its request id. A backend stores it (see
// [StoredFingerprint]) beside the request id so that a repeated id with
// other parameters is recognised and refused as invalid. An acquire's
// parameters hold the lock-delay it asks for (LockDelay), never the
// namespace default (DefaultLockDelay), which a retry may meet changed;
// [ReplayAcquire] compares an acquire's retry with its record.
func Fingerprint[R Change](req R) string {
	switch r := any(req).(type) {
	case protocol.AcquireRequest:
		if r.LockDelay != 0 { // the same hash as before lock-delays for an acquire without one
			return fingerprint(protocol.OpAcquire, r.Key.Encode(), r.Owner, strconv.FormatInt(int64(r.TTL), 10),
				"lock_delay="+strconv.FormatInt(int64(r.LockDelay), 10))
		}
		return fingerprint(protocol.OpAcquire, r.Key.Encode(), r.Owner, strconv.FormatInt(int64(r.TTL), 10))
	case protocol.RenewRequest:
		return fingerprint(protocol.OpRenew, r.Key.Encode(), r.Owner, strconv.FormatInt(r.Token, 10), strconv.FormatInt(int64(r.TTL), 10))
	case protocol.ReleaseRequest:
		return fingerprint(protocol.OpRelease, r.Key.Encode(), r.Owner, strconv.FormatInt(r.Token, 10))
	case protocol.RevokeRequest:
		return fingerprint(protocol.OpRevoke, r.Key.Encode(), r.Actor, r.Reason, strconv.FormatInt(r.Token, 10))
	}
	panic(fmt.Sprintf("backendkit: Fingerprint of %T", req)) // Change admits no other type
}

// fingerprint hashes op and parts. The text fields cannot hold NUL (it is
// a control character), so joining them with NUL is unambiguous.
func fingerprint(op protocol.Op, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(op))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// EncodeListCursor returns the opaque list cursor that resumes after the
// lease named name. Every backend uses it, so cursors are portable.
func EncodeListCursor(name string) string { return listcursor.Encode(name) }

// DecodeListCursor returns the name a cursor from [EncodeListCursor]
// resumes after. [protocol.ListRequest.Validate] refuses a cursor it
// cannot decode.
func DecodeListCursor(cursor string) (string, error) {
	return listcursor.Decode(cursor, protocol.MaxNameLen)
}

// NewError returns a *[protocol.Error] for a non-success status: a backend
// reports timeout and unavailable with it, the driver's error as cause.
// The message says what failed and what to do; it does not repeat the
// cause, which the error's text appends.
func NewError(op protocol.Op, status protocol.Status, cause error, format string, args ...any) *protocol.Error {
	return &protocol.Error{Op: op, Status: status, Err: cause, Message: fmt.Sprintf(format, args...)}
}

// Unauthenticated returns the cause of an unavailable [protocol.Error]
// for a store that refused the caller's credentials (a DSN's role, user
// or password): it matches [protocol.ErrUnauthenticated] and cause, and
// reads as cause does ("unauthenticated" when cause is nil).
func Unauthenticated(cause error) error {
	return &refusal{sentinel: protocol.ErrUnauthenticated, word: "unauthenticated", cause: cause}
}

// Forbidden returns the cause of an unavailable [protocol.Error] for a
// store that refused the caller's credentials the permission the request
// needs (a privilege, a role's permission on a prefix): it matches
// [protocol.ErrForbidden] and cause, and reads as cause does ("forbidden"
// when cause is nil).
func Forbidden(cause error) error {
	return &refusal{sentinel: protocol.ErrForbidden, word: "forbidden", cause: cause}
}

// refusal is the cause made by [Unauthenticated] and [Forbidden].
type refusal struct {
	sentinel error
	word     string
	cause    error
}

func (r *refusal) Error() string {
	if r.cause == nil {
		return r.word
	}
	return r.cause.Error()
}

func (r *refusal) Is(target error) bool { return target == r.sentinel }
func (r *refusal) Unwrap() error        { return r.cause }
