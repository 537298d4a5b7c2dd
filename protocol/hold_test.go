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

// flakyBackend fails renewals with unavailable while failing is set.
type flakyBackend struct {
	protocol.Backend
	failing atomic.Bool
	renews  atomic.Int64
}

func (f *flakyBackend) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	f.renews.Add(1)
	if f.failing.Load() {
		return protocol.Result{}, protocol.NewError(protocol.OpRenew, protocol.StatusUnavailable, nil, "injected outage")
	}
	return f.Backend.Renew(ctx, req)
}

func holdKey(t *testing.T) protocol.Key {
	t.Helper()
	k, err := protocol.NewKey("hold", t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// waitFor polls cond until it holds or a generous bound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHoldRenewsUntilReleased(t *testing.T) {
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := holdKey(t)
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: 300 * time.Millisecond},
		&protocol.HoldConfig{RenewEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first := h.Lease()
	waitFor(t, "two renewals", func() bool { return h.Lease().ExpiresAt.After(first.ExpiresAt.Add(30 * time.Millisecond)) })
	if got := h.Lease().Token; got != first.Token {
		t.Fatalf("renewal changed the token: %d -> %d", first.Token, got)
	}
	if h.Context().Err() != nil {
		t.Fatalf("context cancelled while the lease is held: %v", context.Cause(h.Context()))
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	<-h.Done()
	if cause := context.Cause(h.Context()); !errors.Is(cause, context.Canceled) || errors.Is(cause, protocol.ErrLeaseLost) {
		t.Fatalf("cause after release: %v, want context.Canceled", cause)
	}
	if _, err := rt.Get(ctx, protocol.GetRequest{Key: k}); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("get after release: %v, want not_found", err)
	}
}

func TestHoldCancelsContextWhenRevoked(t *testing.T) {
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := holdKey(t)
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Second},
		&protocol.HoldConfig{RenewEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not cancelled after the lease was revoked")
	}
	<-h.Done()
	cause := context.Cause(h.Context())
	if !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrNotFound) {
		t.Fatalf("cause %v, want lost with not_found", cause)
	}
	if err := h.Release(ctx); !errors.Is(err, protocol.ErrLeaseLost) {
		t.Fatalf("release of a lost lease: %v, want ErrLeaseLost", err)
	}
}

func TestHoldGivesUpBeforeTheLeaseRunsOutDuringAnOutage(t *testing.T) {
	ctx := context.Background()
	fb := &flakyBackend{Backend: memstore.New(nil)}
	rt := protocol.New(fb, nil)
	defer rt.Close(ctx)
	// Renewals every 100ms leave the renewal goroutine that much slack for
	// scheduling delays on a loaded machine before the lease runs out.
	const ttl = time.Second
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: ttl},
		&protocol.HoldConfig{RenewEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fb.failing.Store(true)
	outage := time.Now()
	expires := h.Lease().ExpiresAt
	<-h.Context().Done()
	lostAt := time.Now()
	if !lostAt.Before(expires) {
		t.Fatalf("context cancelled at %v, after the lease expired at %v", lostAt, expires)
	}
	if lostAt.Sub(outage) > ttl {
		t.Fatalf("gave up %v after the outage began, longer than the TTL %v", lostAt.Sub(outage), ttl)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrUnavailable) {
		t.Fatalf("cause %v, want lost with unavailable", cause)
	}
	if fb.renews.Load() < 2 {
		t.Fatalf("%d renewals attempted, want retries during the outage", fb.renews.Load())
	}
	<-h.Done()
}

func TestHoldReturnsTheConflict(t *testing.T) {
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := holdKey(t)
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w0", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute}, nil)
	var le *protocol.Error
	if h != nil || !errors.Is(err, protocol.ErrConflict) || !errors.As(err, &le) || le.Lease == nil || le.Lease.Owner != "w0" {
		t.Fatalf("hold of a held key: %v, %v; want conflict carrying w0's lease", h, err)
	}
}
