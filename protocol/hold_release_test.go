package protocol_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// The usual shutdown: the context given to Hold comes from
// signal.NotifyContext, the signal cancels it, and the deferred
// h.Release(ctx) still releases the lease instead of leaving it to expire.
func TestHoldReleaseAfterTheContextIsCancelled(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(context.Background())
	k := holdKey(t)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // Ctrl-C
	<-h.Context().Done()
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release with the cancelled context: %v, want the lease released", err)
	}
	if _, err := rt.Get(context.Background(), protocol.GetRequest{Key: k}); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("Get after Release = %v, want not_found: the lease was left to expire", err)
	}
}

// hangingRelease never answers a release until its context ends.
type hangingRelease struct{ protocol.Backend }

func (hangingRelease) Release(ctx context.Context, _ protocol.ReleaseRequest) (protocol.Result, error) {
	<-ctx.Done()
	return protocol.Result{}, ctx.Err()
}

// Release on a cancelled context is still bounded: by the renewal timeout.
func TestHoldReleaseAfterCancelIsBounded(t *testing.T) {
	t.Parallel()
	rt := protocol.New(hangingRelease{memstore.New(nil)}, nil)
	defer rt.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	start := time.Now()
	err = h.Release(ctx)
	if !errors.Is(err, protocol.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Release = %v, want timeout from the release's own bound", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Release took %v; want it bounded by the renewal timeout", d)
	}
}

// lostReleaseAnswer releases, then answers unavailable as if the answer
// were lost on the way back, while lose is set.
type lostReleaseAnswer struct {
	protocol.Backend
	lose *atomic.Bool
}

func (b lostReleaseAnswer) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	res, err := b.Backend.Release(ctx, req)
	if err == nil && b.lose.Load() {
		return protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusUnavailable, RequestID: req.RequestID},
			&protocol.Error{Op: protocol.OpRelease, Status: protocol.StatusUnavailable, Message: "the answer was lost"}
	}
	return res, err
}

// Release is safe to call again: after a release that succeeded it
// answers nil again (a deferred Release after an explicit one), and after
// one whose outcome was unknown (timeout, unavailable) it retries under
// the same request id, so that the replay tells that the lease was
// released. Before, each call sent a release of its own: the second
// answered not_found, an error for a lease that was released.
func TestHoldReleaseTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lostOnce bool
	}{{"after a release", false}, {"after an unknown outcome", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var lose atomic.Bool
			lose.Store(tc.lostOnce)
			rt := protocol.New(lostReleaseAnswer{memstore.New(nil), &lose}, nil)
			defer rt.Close(context.Background())
			k := holdKey(t)
			h, err := protocol.Hold(t.Context(), rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute}, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = h.Release(t.Context())
			if tc.lostOnce != (err != nil) {
				t.Fatalf("first Release = %v", err)
			}
			lose.Store(false)
			if err := h.Release(t.Context()); err != nil {
				t.Fatalf("second Release = %v, want nil: the lease was released", err)
			}
			if _, err := rt.Get(t.Context(), protocol.GetRequest{Key: k}); !errors.Is(err, protocol.ErrNotFound) {
				t.Fatalf("Get after Release = %v, want not_found", err)
			}
		})
	}
}

// lostRenewAnswers renews, then answers unavailable as if the answer were
// lost on the way back, while lose is set; it counts the releases it gets.
type lostRenewAnswers struct {
	protocol.Backend
	lose     atomic.Bool
	releases atomic.Int64
}

func (b *lostRenewAnswers) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := b.Backend.Renew(ctx, req)
	if err == nil && b.lose.Load() {
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusUnavailable, RequestID: req.RequestID},
			&protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusUnavailable, Message: "the answer was lost"}
	}
	return res, err
}

func (b *lostRenewAnswers) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	b.releases.Add(1)
	return b.Backend.Release(ctx, req)
}

// A lease given up by the local clock, because no renewal answered, may
// still be live in the store: the renewals took effect and only their
// answers were lost. Release sends the release then (once), so that the
// key is free at once rather than after the TTL and its lock-delay, and
// still answers the loss. Before, it answered the loss without a release.
func TestHoldReleasesALeaseLostByTheLocalClock(t *testing.T) {
	t.Parallel()
	b := &lostRenewAnswers{Backend: memstore.New(nil)}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	k := holdKey(t)
	h, err := protocol.Hold(t.Context(), rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: 2 * time.Second,
		LockDelay: time.Minute}, &protocol.HoldConfig{RenewEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.lose.Store(true)
	select {
	case <-h.Context().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the lease was not given up while no renewal answered")
	}
	<-h.Done()
	if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
	// The renewals took effect: the store holds the lease (for about a
	// TTL more: a loaded machine may make that premise fail).
	if _, err := rt.Get(t.Context(), protocol.GetRequest{Key: k}); err != nil {
		t.Fatalf("Get before Release = %v, want the lease still held", err)
	}
	for range 2 {
		if err := h.Release(t.Context()); !errors.Is(err, protocol.ErrLeaseLost) {
			t.Fatalf("Release = %v, want the loss (ErrLeaseLost)", err)
		}
	}
	if n := b.releases.Load(); n != 1 {
		t.Fatalf("Release sent %d releases, want 1", n)
	}
	res, err := rt.Get(t.Context(), protocol.GetRequest{Key: k})
	if !errors.Is(err, protocol.ErrNotFound) || res.Lease != nil {
		t.Fatalf("Get after Release = %+v, %v; want not_found without a lock-delay: the lease was not released", res.Lease, err)
	}
}

// A lease the store ended (here revoked) is not released again: Release
// answers the loss without sending anything.
func TestHoldDoesNotReleaseALeaseTheStoreEnded(t *testing.T) {
	t.Parallel()
	b := &lostRenewAnswers{Backend: memstore.New(nil)}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	k := holdKey(t)
	h, err := protocol.Hold(t.Context(), rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 10 * time.Millisecond}) // the wrapper hides memstore's signal
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Revoke(t.Context(), protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the revoke was not heard")
	}
	if err := h.Release(t.Context()); !errors.Is(err, protocol.ErrLeaseLost) || !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("Release = %v, want the loss (not_found)", err)
	}
	if n := b.releases.Load(); n != 0 {
		t.Fatalf("Release sent %d releases of a revoked lease, want none", n)
	}
}
