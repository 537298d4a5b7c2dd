package contract

import (
	"context"
	"errors"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// lossRenewEvery is the renewal interval of the holders in lossCases: the
// loss must reach them long before it (contract v3: loss is heard at once,
// the renewal being only the fallback).
const lossRenewEvery = 30 * time.Second

// lossBound is how soon the loss must reach the holder: far below
// lossRenewEvery, and generous for a loaded machine (the figures are in
// internal/testkit/wakebench).
const lossBound = 5 * time.Second

// holdForLoss holds name for w1 through the first handle, renewing every
// lossRenewEvery, and returns once the holder's watch is live: it made its
// first get, which [protocol.WatchLease] makes once its subscription is
// live. A loss before that is told by that get, not by the store's signal,
// and a case that ended the lease earlier passed on a store that never
// signals (brokenstore's SilentRevoke).
func (e *env) holdForLoss(name string) *protocol.Held {
	e.t.Helper()
	return e.holdForLossWith(protocol.AcquireRequest{Key: e.key(name), Owner: "w1", TTL: 3 * lossRenewEvery, RequestID: e.rid()})
}

// holdForLossWith is holdForLoss for req's key and lease.
func (e *env) holdForLossWith(req protocol.AcquireRequest) *protocol.Held {
	e.t.Helper()
	name := req.Key.Name
	gets := e.gets.Load()
	h, err := protocol.Hold(e.ctx, e.a, req, &protocol.HoldConfig{RenewEvery: lossRenewEvery})
	if err != nil {
		e.t.Fatalf("hold %s: %v", name, err)
	}
	e.t.Cleanup(func() { _ = h.Release(context.Background()) })
	for deadline := time.Now().Add(lossBound); e.gets.Load() == gets; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("hold %s: the holder's watch made no get within %v", name, lossBound)
		}
	}
	return h
}

// expectLossHeard waits for h's context to end with a loss, within
// lossBound of start.
func (e *env) expectLossHeard(what string, h *protocol.Held, start time.Time) {
	e.t.Helper()
	select {
	case <-h.Context().Done():
	case <-time.After(lossBound):
		e.t.Fatalf("%s: the holder did not hear of it within %v (its next renewal is %v away)", what, lossBound, lossRenewEvery)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) {
		e.t.Fatalf("%s: the holder's context ended with %v, want a loss", what, cause)
	}
	e.t.Logf("%s reached the holder in %v", what, time.Since(start))
}

// lossCases check that a holder ([protocol.Hold]) hears at once that its
// lease ended elsewhere: through the backend's [protocol.Notifier] signal,
// across handles (processes), not at its next renewal.
func lossCases() []testCase {
	return []testCase{
		{"revoke_through_another_handle", func(e *env) {
			h := e.holdForLoss("job")
			start := time.Now()
			e.revoke(e.b, "job")
			e.expectLossHeard("a revoke through the other handle", h, start)
		}},
		{"revoke_of_a_lease_with_a_lock_delay", func(e *env) {
			// The get that confirms the signal answers not_found carrying
			// the holder's own ended lease: still a loss.
			h := e.holdForLossWith(protocol.AcquireRequest{Key: e.key("job"), Owner: "w1", TTL: 3 * lossRenewEvery,
				LockDelay: lockDelay, RequestID: e.rid()})
			start := time.Now()
			ended := h.Lease()
			ended.ExpiresAt = e.clock.Now()
			e.revoke(e.b, "job")
			e.expectGetDelayed("get after the revoke", "job", ended)
			e.expectLossHeard("a revoke of a lease with a lock-delay", h, start)
		}},
		{"release_by_another_process_with_the_token", func(e *env) {
			h := e.holdForLoss("job")
			start := time.Now()
			l := h.Lease()
			res, err := e.b.Release(e.ctx, protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: e.rid()})
			e.expect("release through the other handle", res, err, protocol.StatusReleased)
			e.expectLossHeard("a release through the other handle", h, start)
		}},
		{"not_lost_while_held", func(e *env) {
			h := e.holdForLoss("job")
			other := e.holdForLoss("other")
			e.revoke(e.b, "other") // a signal for another key
			e.expectLossHeard("a revoke of the other key", other, time.Now())
			select {
			case <-h.Context().Done():
				e.t.Fatalf("the holder of an untouched key lost it: %v", context.Cause(h.Context()))
			case <-time.After(50 * time.Millisecond):
			}
		}},
	}
}
