package schedulertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// faultStore passes calls to a store until it is told to drop them (every
// call answers unavailable at once, as for a worker cut off from the store
// or killed: nothing reaches the store any more) or to pause them (calls
// wait until resumed or until their context ends, as for a worker stalled
// past its TTL).
type faultStore struct {
	protocol.Store
	mu      sync.Mutex
	dropped bool
	paused  chan struct{} // closed on resume; nil when not paused
	// lists logs how long each list that reached the store took. A list
	// reads: unlike an acquire it waits for no other writer, even on a
	// single-writer store, so a slow one says the machine is slow.
	lists timings
	// acquires logs how long each acquire that reached the store took. On
	// a single-writer store an acquire also waits for other writers, so a
	// slow one says the store, not the scheduler, set the pace.
	acquires timings
	// pausedRenewals counts the renewals that waited at the pause: a round
	// of a paused worker began.
	pausedRenewals atomic.Int64
	// waits are the calls that waited at the pause until their context
	// ended (guarded by mu).
	waits []pausedCall
}

// pausedCall is a call that waited at the pause until its context ended:
// when it began and ended, and why its context ended.
type pausedCall struct {
	op         protocol.Op
	began, end time.Time
	err        error // context.Canceled or context.DeadlineExceeded
}

// pausedCalls returns the calls that waited at the pause until their
// context ended.
func (f *faultStore) pausedCalls() []pausedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]pausedCall(nil), f.waits...)
}

var errDropped = errors.New("schedulertest: the worker was cut off from the store")

func (f *faultStore) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = true
}

// reconnect undoes drop: calls reach the store again.
func (f *faultStore) reconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = false
}

func (f *faultStore) pause() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused == nil {
		f.paused = make(chan struct{})
	}
}

func (f *faultStore) resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused != nil {
		close(f.paused)
		f.paused = nil
	}
}

// gate returns nil when the call may go to the store, or the error to answer.
func (f *faultStore) gate(ctx context.Context, op protocol.Op) error {
	f.mu.Lock()
	dropped, paused := f.dropped, f.paused
	f.mu.Unlock()
	if dropped {
		return backendkit.NewError(op, protocol.StatusUnavailable, errDropped, "cut off")
	}
	if paused == nil {
		return nil
	}
	if op == protocol.OpRenew {
		f.pausedRenewals.Add(1)
	}
	began := time.Now()
	select {
	case <-paused:
		return f.gate(ctx, op)
	case <-ctx.Done():
		f.mu.Lock()
		f.waits = append(f.waits, pausedCall{op: op, began: began, end: time.Now(), err: ctx.Err()})
		f.mu.Unlock()
		return backendkit.NewError(op, protocol.StatusTimeout, ctx.Err(), "paused")
	}
}

func failed(op protocol.Op, err error) (protocol.Result, error) {
	return protocol.Result{Op: op, Status: protocol.StatusOf(err)}, err
}

func (f *faultStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if err := f.gate(ctx, protocol.OpAcquire); err != nil {
		return failed(protocol.OpAcquire, err)
	}
	began := time.Now()
	defer func() { f.acquires.add(time.Now(), time.Since(began)) }()
	return f.Store.Acquire(ctx, req)
}

func (f *faultStore) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if err := f.gate(ctx, protocol.OpRenew); err != nil {
		return failed(protocol.OpRenew, err)
	}
	return f.Store.Renew(ctx, req)
}

func (f *faultStore) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	if err := f.gate(ctx, protocol.OpRelease); err != nil {
		return failed(protocol.OpRelease, err)
	}
	return f.Store.Release(ctx, req)
}

func (f *faultStore) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	if err := f.gate(ctx, protocol.OpGet); err != nil {
		return failed(protocol.OpGet, err)
	}
	return f.Store.Get(ctx, req)
}

func (f *faultStore) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	if err := f.gate(ctx, protocol.OpList); err != nil {
		return protocol.ListResult{Status: protocol.StatusOf(err)}, err
	}
	began := time.Now()
	defer func() { f.lists.add(time.Now(), time.Since(began)) }()
	return f.Store.List(ctx, req)
}

func (f *faultStore) Revoke(ctx context.Context, req protocol.RevokeRequest) (protocol.Result, error) {
	if err := f.gate(ctx, protocol.OpRevoke); err != nil {
		return failed(protocol.OpRevoke, err)
	}
	return f.Store.Revoke(ctx, req)
}
