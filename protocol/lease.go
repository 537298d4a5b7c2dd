package protocol

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/listcursor"
	"github.com/leasestore/leasestore/internal/textfield"
)

// LeaseFormatVersion is the serialization version of [Lease] written by this
// release. Backends refuse rows with any other version.
const LeaseFormatVersion = 1

// TTL bounds accepted by acquire and renew.
const (
	MinTTL = time.Millisecond
	MaxTTL = 7 * 24 * time.Hour
)

// MaxLockDelay bounds [AcquireRequest].LockDelay and the namespace
// defaults of [Config].LockDelays.
const MaxLockDelay = time.Hour

// MinLockDelay is the least non-zero lock-delay: stores keep lock-delays
// to the microsecond, so a shorter one would be kept as none (and, in a
// request, skip the namespace default). It is refused as invalid.
const MinLockDelay = time.Microsecond

// List page sizes.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Lease is a lease as stored by a backend. Times come from the backend's
// clock and are kept at microsecond precision. Lease is a plain value; a
// *Lease inside a [Result] belongs to the caller.
type Lease struct {
	Key        Key
	Owner      string
	Token      int64     // fencing token, strictly increasing per key across acquires
	AcquiredAt time.Time // when the current token was issued
	RenewedAt  time.Time // last acquire or renew
	ExpiresAt  time.Time // the lease is live while the backend's now is before this
	Version    int       // serialization format version, LeaseFormatVersion
	// LockDelay is the lease's lock-delay (0: none): when the lease ends
	// other than by its holder's release (it is revoked, or runs out),
	// acquires of the key answer conflict until LockDelay after it ended.
	// See [AcquireRequest].LockDelay.
	LockDelay time.Duration
}

// LiveAt reports whether the lease is still live at now (now < ExpiresAt).
func (l Lease) LiveAt(now time.Time) bool { return now.Before(l.ExpiresAt) }

// FreeAt is when an acquire may take the key if the lease runs out
// un-renewed: ExpiresAt plus LockDelay. For the ended lease that a
// lock-delay conflict carries, ExpiresAt is when it ended (its revoke or
// its expiry), and FreeAt is when the delay ends.
func (l Lease) FreeAt() time.Time { return l.ExpiresAt.Add(l.LockDelay) }

// DelayedAt reports whether, at now, the lease has ended (now is not
// before ExpiresAt) and its lock-delay still keeps the key from acquires:
// what a conflict carrying it means when its holder's lease is no longer
// live.
func (l Lease) DelayedAt(now time.Time) bool { return !l.LiveAt(now) && now.Before(l.FreeAt()) }

// LockDelayText describes l, an ended lease whose lock-delay keeps the
// key, as judged at now: when the lease ended and when the key is free;
// at or after that time (a store that judges the end of a lock-delay
// late, never early, as etcd does) that the delay ended then and the store
// has not yet freed the key, rather than that the key is free at a time
// already past. A lock-delay conflict's message ([LockDelayPrefix]) and
// the message of a wait that gave up on such a key say it.
func (l Lease) LockDelayText(now time.Time) string {
	ended, free := l.ExpiresAt.UTC().Format(time.RFC3339Nano), l.FreeAt().UTC().Format(time.RFC3339Nano)
	if now.Before(l.FreeAt()) {
		return fmt.Sprintf("the lease of %s (token %d) ended at %s; the key is free at %s", textfield.Shown(l.Owner), l.Token, ended, free)
	}
	return fmt.Sprintf("the lease of %s (token %d) ended at %s; its lock-delay ended at %s, but %s",
		textfield.Shown(l.Owner), l.Token, ended, free, LateLockDelayNote)
}

// LateLockDelayNote ends the messages about a lock-delay a store keeps
// past its end: one that judges that end late, never early (etcd), has
// not yet freed the key.
const LateLockDelayNote = "the store has not yet freed the key (it sees the end of a lock-delay late, never early)"

// ExpiredText describes l, a lease the store still holds live although
// its ExpiresAt has passed (a store that sees expiry late, never early,
// as etcd does): that it expired then and the store has not yet freed the
// key. A conflict with such a lease, and a wait that gave up on it, say
// it rather than that the key is held until a time already past.
func (l Lease) ExpiredText() string {
	return fmt.Sprintf("the lease of %s (token %d) expired at %s, but the store has not yet freed the key "+
		"(it sees expiry late, never early)", textfield.Shown(l.Owner), l.Token, l.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// LockDelayPrefix starts the message of an acquire's conflict that the
// lock-delay of an ended lease, not a live lease, caused
// ([Result.KeptByLockDelay]): a store's, and the one [AcquireWait] answers
// when it gives up waiting on such a key. A conflict with a live lease
// never starts with it. Outside this package, leasectl keeps it on the
// result of such a wait that an interrupt stopped (status "interrupted",
// outside the vocabulary, which KeptByLockDelay does not match), so that
// its output still tells the ended lease from a live one.
const LockDelayPrefix = "lock-delay: "

// KeptByLockDelay reports whether r is an acquire's conflict caused by the
// lock-delay of the ended lease it carries rather than by a live lease: the
// store's verdict, by the store's clock (the caller's may differ, so
// [Lease.DelayedAt] at the caller's now can judge otherwise near the end).
func (r Result) KeptByLockDelay() bool {
	return r.Status == StatusConflict && r.Lease != nil && strings.HasPrefix(r.Message, LockDelayPrefix)
}

// KeptByLockDelay reports whether e is an acquire's conflict caused by the
// lock-delay of the ended lease it carries: [Result.KeptByLockDelay] for
// the error an operation returns. False for a nil e.
func (e *Error) KeptByLockDelay() bool {
	return e != nil && e.Status == StatusConflict && e.Lease != nil && strings.HasPrefix(e.Message, LockDelayPrefix)
}

// Result is what every lease operation returns: the status, the key asked
// for, the lease acted on (or, for conflict, stale_token and not_owner, the
// lease currently held; for a get's not_found while a lock-delay keeps the
// key, the ended lease; nil when there is none), whether the outcome is a
// replay of an earlier request with the same request id, the request id,
// and a human-readable message (which, by [Error]'s rule, does not repeat
// the key).
type Result struct {
	Op        Op
	Status    Status
	Key       Key // the request's key, set by the runtime
	Lease     *Lease
	Replayed  bool
	RequestID string
	Message   string
}

// Err returns nil for a success status and an *[Error] matching the status's
// sentinel otherwise.
func (r Result) Err() error {
	if r.Status.Success() {
		return nil
	}
	e := &Error{Op: r.Op, Status: r.Status, Key: r.Key, Lease: r.Lease, Message: r.Message}
	if e.Key == (Key{}) && r.Lease != nil {
		e.Key = r.Lease.Key
	}
	return e
}

// ListResult is the answer to a list: a page of leases ordered by key name,
// and the cursor for the next page ("" when this page is the last).
type ListResult struct {
	Status     Status
	Leases     []Lease
	NextCursor string
	RequestID  string
	Message    string
}

// AcquireRequest asks for a lease on Key for TTL on behalf of Owner.
// RequestID makes the request idempotent; the runtime generates one when empty.
//
// LockDelay (opt-in, 0 or [MinLockDelay] to [MaxLockDelay]; kept, like the
// lease's times, to the microsecond, so a delay under 1µs is invalid) is
// carried by the lease: after
// the lease ends other than by its holder's release (a revoke, or expiry),
// acquires of the key answer conflict until LockDelay has passed (by the
// backend's clock), carrying the ended lease (its ExpiresAt is when it
// ended, see [Lease.FreeAt]), so that a holder that did not hear of its
// loss has time to stop before anyone else starts. A release by the holder
// frees the key at once. Zero takes the [Runtime]'s namespace default
// ([Config].LockDelays), none unless configured.
//
// The request's parameters, which a retry with the same RequestID must
// repeat (another request under a used id is invalid), are Key, Owner, TTL
// and LockDelay: the lock-delay asked for, not the default. A retry is
// compared on its lock-delay with the lease the first attempt got: zero
// matches any (the default may have changed since: a restart, another
// server), another only the same.
type AcquireRequest struct {
	Key       Key
	Owner     string
	TTL       time.Duration
	RequestID string
	LockDelay time.Duration
	// DefaultLockDelay is the lease's lock-delay when LockDelay is zero:
	// the namespace default, which the [Runtime] sets from its
	// [Config].LockDelays (a namespace without one there keeps the value
	// given) for the backend. It is not a parameter of the request. A
	// backend that forwards requests to a store served elsewhere (an
	// httpapi client) sends it as the request's lock-delay, the only one
	// the API carries.
	DefaultLockDelay time.Duration
}

// RenewRequest extends the lease identified by Key, Owner and Token to expire
// TTL after the backend's now. The token does not change. A zero TTL keeps
// the lease's own: the TTL of its last acquire or renew (ExpiresAt minus
// RenewedAt).
type RenewRequest struct {
	Key       Key
	Owner     string
	Token     int64
	TTL       time.Duration
	RequestID string
}

// ReleaseRequest gives up the lease identified by Key, Owner and Token.
type ReleaseRequest struct {
	Key       Key
	Owner     string
	Token     int64
	RequestID string
}

// GetRequest reads the live lease at Key.
type GetRequest struct {
	Key       Key
	RequestID string
}

// ListRequest pages through the leases of one namespace, ordered by name.
// Prefix and Owner filter when non-empty; expired leases are left out unless
// IncludeExpired. Limit defaults to [DefaultListLimit] and may not exceed
// [MaxListLimit]. Cursor is the NextCursor of the previous page, which
// goes on only with its own list (the same Namespace, Prefix, Owner and
// IncludeExpired; any Limit): [Runtime.List] refuses another list's as
// invalid, which would otherwise start after its key and leave out the
// leases before it.
type ListRequest struct {
	Namespace      string
	Prefix         string
	Owner          string
	IncludeExpired bool
	Limit          int
	Cursor         string
	RequestID      string
}

// RevokeRequest removes the live lease at Key whoever holds it, recording
// Actor and Reason in the audit trail. With a non-zero Token, only the lease
// with that token is revoked (stale_token or not_owner otherwise).
type RevokeRequest struct {
	Key       Key
	Actor     string
	Reason    string
	Token     int64
	RequestID string
}

func validateTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("ttl: %s is outside [%s, %s]", durations.Format(ttl), durations.Format(MinTTL), durations.Format(MaxTTL))
	}
	return nil
}

// validateRenewTTL accepts zero (keep the lease's TTL) or a valid TTL.
func validateRenewTTL(ttl time.Duration) error {
	if ttl == 0 {
		return nil
	}
	return validateTTL(ttl)
}

func validateLockDelay(d time.Duration) error {
	return validateDelay("lock delay", d)
}

// validateDelay checks a lock-delay named field.
func validateDelay(field string, d time.Duration) error {
	if d < 0 || d > MaxLockDelay {
		return fmt.Errorf("%s: %s is outside [0, %s]", field, durations.Format(d), durations.Format(MaxLockDelay))
	}
	if d > 0 && d < MinLockDelay {
		return fmt.Errorf("%s: %s is under %s, the resolution lock-delays are kept at (it would be kept as none): "+
			"write 0s for none (or the namespace default), or at least %s",
			field, durations.Format(d), durations.Format(MinLockDelay), durations.Format(MinLockDelay))
	}
	return nil
}

func validateToken(token int64) error {
	if token <= 0 {
		return fmt.Errorf("token: must be positive, got %d", token)
	}
	return nil
}

func validateRequestID(id string) error {
	return textfield.Validate("request id", id, MaxRequestIDLen)
}

// StoredLockDelay is the lease's lock-delay (r.LockDelay, or
// r.DefaultLockDelay when that is zero) as every backend stores it and
// answers it: truncated to the microsecond, the precision of the lease's
// times.
func (r AcquireRequest) StoredLockDelay() time.Duration {
	if r.LockDelay == 0 {
		return r.DefaultLockDelay.Truncate(time.Microsecond)
	}
	return r.LockDelay.Truncate(time.Microsecond)
}

// Validate checks every field, including the request id.
func (r AcquireRequest) Validate() error {
	return errors.Join(r.Key.Validate(), textfield.Validate("owner", r.Owner, MaxOwnerLen),
		validateTTL(r.TTL), validateLockDelay(r.LockDelay), validateDelay("default lock delay", r.DefaultLockDelay),
		validateRequestID(r.RequestID))
}

// Validate checks every field, including the request id.
func (r RenewRequest) Validate() error {
	return errors.Join(r.Key.Validate(), textfield.Validate("owner", r.Owner, MaxOwnerLen),
		validateToken(r.Token), validateRenewTTL(r.TTL), validateRequestID(r.RequestID))
}

// Validate checks every field, including the request id.
func (r ReleaseRequest) Validate() error {
	return errors.Join(r.Key.Validate(), textfield.Validate("owner", r.Owner, MaxOwnerLen),
		validateToken(r.Token), validateRequestID(r.RequestID))
}

// Validate checks every field, including the request id.
func (r GetRequest) Validate() error {
	return errors.Join(r.Key.Validate(), validateRequestID(r.RequestID))
}

// Validate checks every field, including the request id and the cursor,
// which must be one of this list's (a cursor of another namespace or other
// filters is refused; one made by a backend used directly is of any list).
// A zero Limit is valid and means [DefaultListLimit].
func (r ListRequest) Validate() error {
	var prefixErr, ownerErr, limitErr, cursorErr error // nil when fine: no slice to allocate
	if r.Prefix != "" {
		prefixErr = textfield.Validate("prefix", r.Prefix, MaxNameLen)
	}
	if r.Owner != "" {
		ownerErr = textfield.Validate("owner", r.Owner, MaxOwnerLen)
	}
	if r.Limit < 0 || r.Limit > MaxListLimit {
		limitErr = fmt.Errorf("limit: %d is outside [0, %d]", r.Limit, MaxListLimit)
	}
	// A cursor [Runtime.List] answered is bound to its list: another
	// list would start after its name and leave out the leases before it.
	cursorErr = listcursor.Check(r.Cursor, r.cursorScope(), MaxNameLen)
	return errors.Join(textfield.Validate("namespace", r.Namespace, MaxNamespaceLen), validateRequestID(r.RequestID),
		prefixErr, ownerErr, limitErr, cursorErr)
}

// cursorScope is the list r pages through, which the cursors answered to
// it are bound to.
func (r ListRequest) cursorScope() listcursor.Scope {
	return listcursor.Scope{Namespace: r.Namespace, Prefix: r.Prefix, Owner: r.Owner, IncludeExpired: r.IncludeExpired}
}

// Validate checks every field, including the request id. Token may be zero
// (revoke whatever lease is live) but not negative.
func (r RevokeRequest) Validate() error {
	var tokenErr error
	if r.Token < 0 {
		tokenErr = fmt.Errorf("token: must not be negative, got %d", r.Token)
	}
	return errors.Join(r.Key.Validate(), textfield.Validate("actor", r.Actor, MaxOwnerLen),
		textfield.Validate("reason", r.Reason, MaxReasonLen), tokenErr, validateRequestID(r.RequestID))
}

// EffectiveLimit returns Limit, or [DefaultListLimit] when Limit is zero.
func (r ListRequest) EffectiveLimit() int {
	if r.Limit == 0 {
		return DefaultListLimit
	}
	return r.Limit
}
