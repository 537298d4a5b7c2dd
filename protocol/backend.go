package protocol

import (
	"context"
	"time"
)

// Store is the lease API that services and HTTP handlers depend on. [*Runtime]
// implements it; tests of a service may pass a [*Runtime] over the in-memory
// backend. Implementations are safe for concurrent use.
//
// Every operation returns a result whose Status is one of the vocabulary's,
// and a non-nil error exactly when that status is not a success; the error is
// an *[Error] matching the status's sentinel.
type Store interface {
	Acquire(ctx context.Context, req AcquireRequest) (Result, error)
	Renew(ctx context.Context, req RenewRequest) (Result, error)
	Release(ctx context.Context, req ReleaseRequest) (Result, error)
	Get(ctx context.Context, req GetRequest) (Result, error)
	List(ctx context.Context, req ListRequest) (ListResult, error)
	Revoke(ctx context.Context, req RevokeRequest) (Result, error)
	Health(ctx context.Context) error
	Close(ctx context.Context) error
}

// Backend is what a storage engine implements. Callers wrap it in a
// [Runtime] with [New], which validates requests, fills in request ids and
// deadlines, calls hooks and owns the backend's lifecycle.
//
// The runtime guarantees a backend that every request passed validation, that
// its request id is set, that ctx carries a deadline, and that Close is called
// once, after in-flight operations have finished or the close context expired.
// A backend called directly checks its requests itself, before it reads or
// writes anything: it answers a request that fails its Validate as the
// runtime does (a result with status invalid, its Op, Key and RequestID set,
// and an *[Error] matching [ErrInvalid] whose cause is the Validate error),
// and refuses so a change (acquire, renew, release, revoke) without a
// request id, since it makes none; a get or list needs none. A [BulkRenewer]
// answers such a request invalid in its result and sends the others. The
// storage backends (memstore, SQLite, PostgreSQL, etcd) do it with
// backendkit's Refuse functions; an httpapi client sends each request to a
// served runtime, which checks it (and makes the request id of a change
// sent without one).
//
// A backend reports every protocol outcome in the [Result] (or [ListResult])
// with a nil error: the success statuses, not_found, conflict, stale_token,
// not_owner and expired. A request id reused with other parameters it
// answers as the runtime does, as an invalid request (above), but for a
// [BulkRenewer]'s member, answered in its result alone. Beyond these, it
// returns a non-nil error only when it could not answer; that
// error should be an *[Error] with status timeout or unavailable, built in one
// place per backend from driver errors. Any other error is reported to callers
// as unavailable, with the error as cause. Result.Op and Result.RequestID need
// not be set by the backend.
//
// Semantics no backend may bend are listed in DESIGN.md and checked by the
// contract package: fencing tokens strictly increase per key across acquires,
// expiry is judged by the backend's clock, each state change and its audit
// record commit in one atomic step, and a repeated request id returns the
// first outcome flagged Replayed.
//
// Implementations must be safe for concurrent use.
type Backend interface {
	// Name identifies the backend in metrics and logs: "postgres", "sqlite", "memory".
	Name() string
	Acquire(ctx context.Context, req AcquireRequest) (Result, error)
	Renew(ctx context.Context, req RenewRequest) (Result, error)
	Release(ctx context.Context, req ReleaseRequest) (Result, error)
	Get(ctx context.Context, req GetRequest) (Result, error)
	List(ctx context.Context, req ListRequest) (ListResult, error)
	Revoke(ctx context.Context, req RevokeRequest) (Result, error)
	// Health returns nil when the backend can serve operations.
	Health(ctx context.Context) error
	// Close releases what the backend owns. Resources borrowed from the
	// caller (a pool, a *sql.DB) are left open.
	Close(ctx context.Context) error
}

// OperationEvent describes one finished operation, for an [Observer].
type OperationEvent struct {
	Op       Op
	Status   Status // "" for a successful health, close or [Runtime.Do]
	Duration time.Duration
	Backend  string
	Replayed bool
	Items    int // sweep: the rows removed; 0 otherwise
}

// Observer is called once per operation, after it finished, on the calling
// goroutine. Implementations must be safe for concurrent use and fast.
type Observer interface {
	ObserveOperation(ctx context.Context, ev OperationEvent)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, ev OperationEvent)

// ObserveOperation calls f.
func (f ObserverFunc) ObserveOperation(ctx context.Context, ev OperationEvent) { f(ctx, ev) }

// StateChange describes one state change that took effect (acquired,
// renewed, released or revoked, not replayed), for an [AuditHook]. The durable
// audit record was already written by the backend in the same atomic step;
// the hook is for sinks outside the database (logs, streams).
type StateChange struct {
	Op        Op
	Status    Status
	Lease     Lease // the lease acted on
	RequestID string
	Actor     string // the owner for acquire, renew and release; the actor for revoke
	Reason    string // revoke only
}

// AuditHook is called once per state change, after it took effect, on the
// calling goroutine. Implementations must be safe for concurrent use.
type AuditHook interface {
	RecordStateChange(ctx context.Context, ch StateChange)
}

// AuditHookFunc adapts a function to [AuditHook].
type AuditHookFunc func(ctx context.Context, ch StateChange)

// RecordStateChange calls f.
func (f AuditHookFunc) RecordStateChange(ctx context.Context, ch StateChange) { f(ctx, ch) }
