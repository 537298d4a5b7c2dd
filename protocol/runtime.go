package protocol

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/leasestore/leasestore/internal/listcursor"
	"github.com/leasestore/leasestore/internal/nsglob"
	"github.com/leasestore/leasestore/internal/textfield"
)

// DefaultTimeout is the deadline the runtime applies to an operation whose
// context has none.
const DefaultTimeout = 5 * time.Second

// Config tunes a [Runtime]. A nil *Config means all defaults.
type Config struct {
	// DefaultTimeout bounds operations whose context has no deadline.
	// Default: [DefaultTimeout] (5s).
	DefaultTimeout time.Duration
	// Observer is called once per operation. Default: none.
	Observer Observer
	// AuditHook is called once per state change that took effect. Default: none.
	AuditHook AuditHook
	// NewRequestID makes a request id when the caller gives none.
	// Default: [NewRequestID], time-ordered.
	NewRequestID func() string
	// Sweep tunes the background removal of ended leases' rows, for a
	// backend that implements [Sweeper]. Default (nil): see [SweepConfig].
	Sweep *SweepConfig
	// LockDelays are namespace defaults of the lock-delay: an acquire
	// whose LockDelay is zero takes the Delay of the first entry whose
	// Namespaces glob matches its namespace ([AcquireRequest].DefaultLockDelay:
	// not a parameter of the request, so changing them does not turn a
	// retry invalid). Default: none,
	// so a lease has a lock-delay only when its acquire asks for one.
	// [New] panics on an empty or malformed glob, a delay outside
	// [0, MaxLockDelay] or under MinLockDelay but zero, or an entry that can never apply (its glob given
	// earlier, or matched by an earlier one: see [ValidateLockDelays]);
	// check them first with ValidateLockDelays.
	LockDelays []NamespaceLockDelay
}

// NamespaceLockDelay is a namespace default of the lock-delay (see
// [Config].LockDelays and [AcquireRequest].LockDelay).
type NamespaceLockDelay struct {
	// Namespaces is a namespace glob, the grammar of every namespace glob
	// of leasestore (docs/http-api.md, "Namespace globs"): "*" for all
	// (slashes included: "team/a"), "jobs-*", "billing", "shard-[0-3]".
	Namespaces string
	Delay      time.Duration
}

// Validate checks the glob and the delay. An empty glob, which names no
// namespace, is refused ("*" names every one). A malformed glob's error
// matches [path.ErrBadPattern].
func (d NamespaceLockDelay) Validate() error {
	if d.Namespaces == "" {
		return errors.New(`lock delay: the namespace glob is empty and names no namespace: write one, such as jobs-*, or "*" for every namespace`)
	}
	if err := nsglob.Validate(d.Namespaces); err != nil {
		return fmt.Errorf("lock delay: %w", err)
	}
	return validateLockDelay(d.Delay)
}

// ValidateLockDelays checks a list of namespace defaults as
// [Config].LockDelays takes it: each entry ([NamespaceLockDelay.Validate]),
// and that each can apply. The first entry whose glob matches a namespace
// applies, so an entry is refused when its glob is given earlier too, or
// an earlier glob matches every namespace it does: any entry after "*", a
// plain namespace an earlier glob matches ("jobs-*" before "jobs-eu"), or
// a narrower glob ("jobs-*" before "jobs-eu-*", "j*" before "jobs-?").
// Inclusion is judged over strings of any characters, not only those a
// namespace may hold.
// `leasectl serve --lock-delay` refuses the same entries.
func ValidateLockDelays(delays []NamespaceLockDelay) error {
	var errs []error
	for i, d := range delays {
		if err := d.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("entry %d: %w", i, err))
			continue
		}
		for j, prev := range delays[:i] {
			if prev.Namespaces == d.Namespaces {
				errs = append(errs, fmt.Errorf("lock delay: the namespace glob %q is given twice (entries %d and %d): the first applies, give it once",
					d.Namespaces, j, i))
				break
			}
			if nsglob.Shadows(prev.Namespaces, d.Namespaces) {
				errs = append(errs, fmt.Errorf("lock delay: entry %d, %q, can never apply: the earlier entry %d, %q, matches every namespace it does, "+
					"and the first matching glob applies: give %q first, or drop it", i, d.Namespaces, j, prev.Namespaces, d.Namespaces))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// lockDelayOf returns the default lock-delay of namespace ns.
func lockDelayOf(defaults []NamespaceLockDelay, ns string) time.Duration {
	for _, d := range defaults {
		if nsglob.Match(d.Namespaces, ns) {
			return d.Delay
		}
	}
	return 0
}

// Runtime is the object callers use: it wraps a [Backend], validates every
// request before the backend sees it, applies the default deadline, generates
// request ids, maps deadlines and cancellation to timeout, calls the hooks,
// and owns the backend's lifecycle: after [Runtime.Close] every operation
// answers closed, and the backend is closed exactly once.
//
// A Runtime is safe for concurrent use. It implements [Store].
type Runtime struct {
	backend   Backend
	timeout   time.Duration
	observer  Observer
	audit     AuditHook
	newReqID  func() string
	mu        sync.Mutex
	closed    bool
	inflight  int
	drained   chan struct{} // closed when closed && inflight == 0
	closeDone chan struct{} // closed when the backend's Close returned
	closeErr  error         // set before closeDone is closed
	closing   chan struct{} // closed when the first Close starts
	// closingCtx is cancelled when the first Close starts: it cuts short
	// the runtime's calls that wait on their own (a subscription).
	closingCtx  context.Context
	stopClosing context.CancelFunc
	sweep       *sweepLoop // the background sweep; nil when there is none
	delays      []NamespaceLockDelay
}

var _ Store = (*Runtime)(nil)

// New returns a Runtime that owns b: closing the runtime closes b. cfg may be nil.
func New(b Backend, cfg *Config) *Runtime {
	if cfg == nil {
		cfg = &Config{}
	}
	r := &Runtime{
		backend:   b,
		timeout:   cfg.DefaultTimeout,
		observer:  cfg.Observer,
		audit:     cfg.AuditHook,
		newReqID:  cfg.NewRequestID,
		drained:   make(chan struct{}),
		closeDone: make(chan struct{}),
		closing:   make(chan struct{}),
	}
	r.closingCtx, r.stopClosing = context.WithCancel(context.Background())
	if err := ValidateLockDelays(cfg.LockDelays); err != nil {
		panic("protocol: New: " + err.Error())
	}
	r.delays = slices.Clone(cfg.LockDelays)
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	if r.newReqID == nil {
		r.newReqID = NewRequestID
	}
	r.sweep = startSweep(b, cfg.Sweep, r.timeout, r.observer)
	return r
}

// NewRequestID returns a request id that sorts by the time it was made: a
// UUIDv7 (48 bits of Unix milliseconds, then random bits) as 32 hex
// digits. Ids that reach a store in about the order they were made are
// inserted at the end of its request-id index, which keeps writes cheap.
func NewRequestID() string {
	u, err := uuid.NewV7()
	if err != nil { // the system's randomness failed
		return RandomRequestID()
	}
	return hex.EncodeToString(u[:])
}

// RandomRequestID returns 32 random hex digits.
func RandomRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// BackendName returns the wrapped backend's name.
func (r *Runtime) BackendName() string { return r.backend.Name() }

// Backend returns the wrapped backend, to learn which optional interfaces
// it has (a [Sweeper], an audit.Follower) without running an operation:
// the observer hears of nothing. A call made on it directly bypasses the
// runtime (no default deadline, no closed answer after [Runtime.Close],
// not observed); use [Runtime.Do] to run one as the runtime runs its own.
// The runtime keeps owning it: do not close it.
func (r *Runtime) Backend() Backend { return r.backend }

func (r *Runtime) begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.inflight++
	return true
}

func (r *Runtime) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight--
	if r.closed && r.inflight == 0 {
		close(r.drained)
	}
}

// requestID returns id, or a new request id when the caller gave none.
func (r *Runtime) requestID(id string) string {
	if id == "" {
		return r.newReqID()
	}
	return id
}

// call runs one keyed operation through the runtime's pipeline: invalid
// is the request's validation error (nil for a valid request) and fn sends
// it to the backend.
func (r *Runtime) call(ctx context.Context, op Op, key Key, reqID string, invalid error,
	fn func(context.Context) (Result, error)) (Result, error) {
	start := time.Now()
	res, fault := r.run(ctx, op, invalid, fn)
	res.Op, res.Key, res.RequestID = op, key, reqID
	if res.Message == "" {
		res.Message = describe(op, res)
	}
	r.observe(ctx, op, res.Status, res.Replayed, start)
	r.sweep.poke()
	if res.Status.Success() {
		return res, nil
	}
	e := &Error{Op: op, Status: res.Status, Key: key, Lease: res.Lease, Message: res.Message}
	if fault != nil {
		e.Message, e.Err = fault.Message, fault.Err
	}
	return res, e
}

// run validates and runs one operation, op. When the store gave no answer
// (invalid input, closed, a deadline, a backend error) fault says why:
// its status, a message and the cause, and the result carries the status
// and [Error.Detail].
func (r *Runtime) run(ctx context.Context, op Op, invalid error, fn func(context.Context) (Result, error)) (Result, *Error) {
	if invalid != nil {
		return faulted(&Error{Status: StatusInvalid, Err: invalid})
	}
	if !r.begin() {
		return faulted(&Error{Status: StatusClosed, Message: "the store was closed"})
	}
	defer r.end()
	ctx, cancel := r.withDeadline(ctx)
	defer cancel()
	if ctx.Err() != nil {
		return faulted(interrupted(ctx, op, "", nil))
	}
	res, err := fn(ctx)
	if err != nil {
		return faulted(failure(ctx, op, err))
	}
	if !res.Status.Known() {
		return faulted(&Error{Status: StatusUnavailable,
			Message: fmt.Sprintf("backend %s returned unknown status %q", r.backend.Name(), res.Status)})
	}
	return res, nil
}

// faulted is the result of an operation the store did not answer.
func faulted(f *Error) (Result, *Error) {
	return Result{Status: f.Status, Message: f.Detail()}, f
}

// failure turns a backend error into the runtime's: a passed deadline or a
// cancelled context is always timeout, whatever the driver said (see
// [interrupted]); a status outside the vocabulary, or a success reported
// as an error, is unavailable. A backend's *Error gives its message and
// its cause; the runtime's *Error wraps that cause, not the backend's
// *Error, so that it matches exactly one sentinel. op is the operation
// (see [interrupted]).
func failure(ctx context.Context, op Op, err error) *Error {
	status := StatusOf(err)
	if status.Success() || !status.Known() {
		status = StatusUnavailable
	}
	msg, cause := "", err
	var e *Error
	if errors.As(err, &e) {
		msg, cause = e.Message, e.Err
	}
	if ctx.Err() != nil {
		return interrupted(ctx, op, msg, cause)
	}
	return &Error{Status: status, Message: msg, Err: cause}
}

// interrupted is the timeout of an operation whose context ended before
// the store answered. The vocabulary has no status for a cancelled
// caller, and the effect is unknown either way, so both are timeout; the
// message says which happened (then the backend's message, when there is
// one), and the cause matches ctx's error (context.Canceled or
// context.DeadlineExceeded) and its [context.Cause] (a signal, say) as
// well as the backend's cause, when there is one. The message advises
// retrying with the same request id to learn the outcome, except for a
// read (op get, list, health, audit), which has none.
func interrupted(ctx context.Context, op Op, msg string, cause error) *Error {
	why := context.Cause(ctx)
	lead := "the deadline passed before the store answered"
	if errors.Is(ctx.Err(), context.Canceled) {
		lead = "cancelled by the caller before the store answered"
	}
	switch {
	case cause == nil:
		cause = why
	case !errors.Is(cause, why):
		cause = fmt.Errorf("%w: %w", why, cause)
	}
	if !op.reads() {
		lead += "; retry with the same request id to learn the outcome"
	}
	if msg != "" {
		lead += ": " + msg
	}
	return &Error{Status: StatusTimeout, Message: lead, Err: cause}
}

// defaultTimeoutOf returns the deadline s applies to an operation whose
// context has none: a Runtime's DefaultTimeout, else [DefaultTimeout].
func defaultTimeoutOf(s Store) time.Duration {
	if r, ok := s.(*Runtime); ok {
		return r.timeout
	}
	return DefaultTimeout
}

func (r *Runtime) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.timeout)
}

func (r *Runtime) observe(ctx context.Context, op Op, status Status, replayed bool, start time.Time) {
	if r.observer == nil {
		return
	}
	r.observer.ObserveOperation(ctx, OperationEvent{
		Op: op, Status: status, Duration: time.Since(start), Backend: r.backend.Name(), Replayed: replayed,
	})
}

func (r *Runtime) recordChange(ctx context.Context, res Result, actor, reason string) {
	if r.audit == nil || res.Replayed || !res.Status.Success() || res.Lease == nil {
		return
	}
	r.audit.RecordStateChange(ctx, StateChange{
		Op: res.Op, Status: res.Status, Lease: *res.Lease, RequestID: res.RequestID, Actor: actor, Reason: reason,
	})
}

// change is call for a state-changing operation: the audit hook hears of
// the change it made, on behalf of actor (with reason, for revoke).
func (r *Runtime) change(ctx context.Context, op Op, key Key, reqID string, invalid error, actor, reason string,
	fn func(context.Context) (Result, error)) (Result, error) {
	res, err := r.call(ctx, op, key, reqID, invalid, fn)
	r.recordChange(ctx, res, actor, reason)
	return res, err
}

// Acquire takes a lease on req.Key for req.TTL. On success the result's
// status is acquired and its lease carries a fresh fencing token; if a live
// lease is held (by anyone, the same owner included) the status is conflict
// and the result carries that lease. While the lock-delay of a lease that
// was revoked or ran out keeps the key, the status is conflict too, and the
// result carries that ended lease ([Lease.DelayedAt]). A zero
// req.LockDelay takes the namespace's default ([Config].LockDelays), which
// the backend gets as req.DefaultLockDelay, apart from the request's
// parameters: a retry reaching a runtime with another default replays.
func (r *Runtime) Acquire(ctx context.Context, req AcquireRequest) (Result, error) {
	req.RequestID = r.requestID(req.RequestID)
	if req.LockDelay == 0 {
		if d := lockDelayOf(r.delays, req.Key.Namespace); d != 0 {
			req.DefaultLockDelay = d
		}
	}
	return r.change(ctx, OpAcquire, req.Key, req.RequestID, req.Validate(), req.Owner, "", func(ctx context.Context) (Result, error) {
		res, err := r.backend.Acquire(ctx, req)
		if res.Replayed && res.Status == StatusAcquired && res.Lease != nil && res.Lease.LockDelay == 0 && req.LockDelay != 0 {
			// A replay is read from the audit record, which holds the
			// lock-delay only since schema 5. The first attempt's lease
			// took req's: the parameters the replay matched include it,
			// at the microseconds every backend stores. (A default is no
			// parameter: what it was then, the backend may know.)
			res.Lease.LockDelay = req.LockDelay.Truncate(time.Microsecond)
		}
		return res, err
	})
}

// Renew extends the lease (req.Key, req.Owner, req.Token) to expire req.TTL
// from the backend's now, or, when req.TTL is zero, the lease's own TTL
// (that of its last acquire or renew). The token is kept.
func (r *Runtime) Renew(ctx context.Context, req RenewRequest) (Result, error) {
	req.RequestID = r.requestID(req.RequestID)
	return r.change(ctx, OpRenew, req.Key, req.RequestID, req.Validate(), req.Owner, "", func(ctx context.Context) (Result, error) {
		return r.backend.Renew(ctx, req)
	})
}

// Release gives up the lease (req.Key, req.Owner, req.Token).
func (r *Runtime) Release(ctx context.Context, req ReleaseRequest) (Result, error) {
	req.RequestID = r.requestID(req.RequestID)
	return r.change(ctx, OpRelease, req.Key, req.RequestID, req.Validate(), req.Owner, "", func(ctx context.Context) (Result, error) {
		return r.backend.Release(ctx, req)
	})
}

// Get returns the live lease at req.Key (found) or not_found. While the
// lock-delay of the key's revoked or expired lease keeps it, not_found
// carries that ended lease (ExpiresAt the time it ended, see
// [Lease.FreeAt]) and a message saying when the key is free, as an
// acquire's conflict does: judge a get by its status, not by its Lease.
func (r *Runtime) Get(ctx context.Context, req GetRequest) (Result, error) {
	req.RequestID = r.requestID(req.RequestID)
	return r.call(ctx, OpGet, req.Key, req.RequestID, req.Validate(), func(ctx context.Context) (Result, error) {
		return r.backend.Get(ctx, req)
	})
}

// Revoke removes the live lease at req.Key on behalf of an operator.
func (r *Runtime) Revoke(ctx context.Context, req RevokeRequest) (Result, error) {
	req.RequestID = r.requestID(req.RequestID)
	return r.change(ctx, OpRevoke, req.Key, req.RequestID, req.Validate(), req.Actor, req.Reason, func(ctx context.Context) (Result, error) {
		return r.backend.Revoke(ctx, req)
	})
}

// List returns one page of the leases in req.Namespace. Its NextCursor
// goes on only with this list (the same namespace and filters): another
// list refuses it as invalid.
func (r *Runtime) List(ctx context.Context, req ListRequest) (ListResult, error) {
	var list ListResult
	req.RequestID = r.requestID(req.RequestID)
	res, err := r.call(ctx, OpList, Key{}, req.RequestID, req.Validate(), func(ctx context.Context) (Result, error) {
		var err error
		list, err = r.backend.List(ctx, req)
		if err != nil {
			return Result{}, err
		}
		// Bound to this list, the cursor is refused by any other (Validate).
		if list.NextCursor, err = listcursor.Bind(list.NextCursor, req.cursorScope(), MaxNameLen); err != nil {
			return Result{}, fmt.Errorf("the backend answered a list cursor that does not decode: %w", err)
		}
		return Result{Status: list.Status, Message: list.Message}, nil
	})
	if err != nil {
		return ListResult{Status: res.Status, RequestID: res.RequestID, Message: res.Message}, err
	}
	list.Status, list.RequestID, list.Message = res.Status, res.RequestID, res.Message
	return list, nil
}

// Health returns nil when the backend can serve operations, and otherwise an
// *[Error] with status unavailable, timeout or closed.
func (r *Runtime) Health(ctx context.Context) error {
	return r.Do(ctx, OpHealth, func(ctx context.Context, b Backend) error { return b.Health(ctx) })
}

// OpAudit names a read of the audit trail in errors and observer events.
const OpAudit Op = "audit"

// Do runs fn, an operation of the wrapped backend that [Store] does not
// name (an audit read, a namespace listing, a sweep on demand), as the
// runtime runs its own: after [Runtime.Close] it answers closed without
// calling fn; ctx gets the default deadline when it has none; Close waits
// for fn to return; the observer hears of it as op (with status "" on
// success). fn must not keep b past its return.
//
// The error is nil when fn returned nil, and otherwise an *[Error] for
// op: timeout when ctx ended first, else the status of an *[Error] in
// fn's chain (invalid, say), else unavailable.
func (r *Runtime) Do(ctx context.Context, op Op, fn func(ctx context.Context, b Backend) error) error {
	start := time.Now()
	_, fault := r.run(ctx, op, nil, func(ctx context.Context) (Result, error) {
		return Result{Status: StatusFound}, fn(ctx, r.backend)
	})
	if fault == nil {
		r.observe(ctx, op, "", false, start)
		return nil
	}
	r.observe(ctx, op, fault.Status, false, start)
	fault.Op = op
	return fault
}

// Close stops the runtime: operations that start afterwards answer closed,
// operations in flight may finish until ctx is done, and then the backend is
// closed, exactly once. Every [Held] of the runtime ends as Close starts,
// its context cancelled with a cause matching [ErrLeaseLost] and
// [ErrClosed] (its renewal in flight cut short), without a release: its
// lease runs out after its TTL unless released first. Calling Close again waits (bounded by its own ctx)
// for the first call and returns its error. If ctx ends before in-flight
// operations finish, the backend is closed anyway, given a grace of its own
// of up to 5s, and the error includes ctx's.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	first := !r.closed
	if first {
		r.closed = true
		close(r.closing)
		r.stopClosing()
		if r.inflight == 0 {
			close(r.drained)
		}
	}
	r.mu.Unlock()
	if !first {
		select {
		case <-r.closeDone:
			return r.closeErr
		case <-ctx.Done():
			return fmt.Errorf("lease: close: waiting for another Close: %w", ctx.Err())
		}
	}

	start := time.Now()
	var waitErr error
	select {
	case <-r.drained:
	case <-ctx.Done():
		waitErr = fmt.Errorf("lease: close: in-flight operations did not finish: %w", ctx.Err())
	}
	// A backend must get the chance to close even when ctx is already done
	// (a backend may give up on a done context at once).
	closeCtx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		closeCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), backendCloseGrace)
		defer cancel()
	}
	r.sweep.stop()
	r.closeErr = errors.Join(waitErr, r.backend.Close(closeCtx))
	var status Status
	if r.closeErr != nil {
		status = StatusOf(r.closeErr)
	}
	r.observe(ctx, OpClose, status, false, start)
	close(r.closeDone)
	return r.closeErr
}

// closingSignal returns a channel closed when the first Close starts:
// [Hold] ends its Held then.
func (r *Runtime) closingSignal() <-chan struct{} { return r.closing }

// backendCloseGrace bounds the backend's Close when the caller's close
// context was already done.
const backendCloseGrace = 5 * time.Second

// describe writes the default message for a result. Like every message
// it names neither the key nor a cause (see [Error]).
func describe(op Op, res Result) string {
	l := res.Lease
	switch res.Status {
	case StatusAcquired, StatusRenewed, StatusFound, StatusConflict:
		if op == OpList {
			return "listed"
		}
		if l != nil {
			return fmt.Sprintf("held by %s with token %d until %s", textfield.Shown(l.Owner), l.Token, l.ExpiresAt.UTC().Format(time.RFC3339Nano))
		}
	case StatusReleased, StatusRevoked:
		if l != nil {
			return fmt.Sprintf("token %d ended", l.Token)
		}
	case StatusNotFound:
		return "no live lease"
	case StatusStaleToken:
		if l != nil {
			return fmt.Sprintf("a newer lease holds the key (token %d)", l.Token)
		}
	case StatusNotOwner:
		return "the lease is not held by the caller with that token"
	case StatusExpired:
		return "the lease expired before the request"
	}
	return string(res.Status)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
