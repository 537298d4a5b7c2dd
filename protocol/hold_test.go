package protocol_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// flakyBackend fails renewals with unavailable while failing is set, and
// answers none until its context ends while hanging is set.
type flakyBackend struct {
	protocol.Backend
	failing, hanging atomic.Bool
	renews           atomic.Int64
}

func (f *flakyBackend) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	f.renews.Add(1)
	if f.hanging.Load() {
		<-ctx.Done()
		return protocol.Result{}, ctx.Err()
	}
	if f.failing.Load() {
		return protocol.Result{}, &protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusUnavailable, Message: "injected outage"}
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

// countingBackend counts renewals and records their request ids.
type countingBackend struct {
	protocol.Backend
	mu       sync.Mutex
	renewIDs []string
}

func (c *countingBackend) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	c.mu.Lock()
	c.renewIDs = append(c.renewIDs, req.RequestID)
	c.mu.Unlock()
	return c.Backend.Renew(ctx, req)
}

func (c *countingBackend) renews() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.renewIDs)
}

// manualClock is a store clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A replayed acquire is history: when the lease it reports is no longer
// held, Hold must answer the refusal instead of a live Held.
func TestHoldRefusesAReplayedAcquireThatIsNoLongerHeld(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		after func(t *testing.T, rt *protocol.Runtime, clock *manualClock, k protocol.Key)
		want  error
	}{
		{"another holder took the key", func(t *testing.T, rt *protocol.Runtime, clock *manualClock, k protocol.Key) {
			clock.Advance(400 * time.Millisecond)
			res, err := rt.Acquire(context.Background(), protocol.AcquireRequest{Key: k, Owner: "b", TTL: time.Minute, RequestID: "b-1"})
			if err != nil || res.Lease.Token != 2 {
				t.Fatalf("b's acquire: %v, %v; want token 2", res.Lease, err)
			}
		}, protocol.ErrStaleToken},
		{"expired", func(t *testing.T, rt *protocol.Runtime, clock *manualClock, k protocol.Key) {
			clock.Advance(400 * time.Millisecond)
		}, protocol.ErrExpired},
		{"revoked", func(t *testing.T, rt *protocol.Runtime, clock *manualClock, k protocol.Key) {
			if _, err := rt.Revoke(context.Background(), protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test"}); err != nil {
				t.Fatal(err)
			}
		}, protocol.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := newManualClock()
			rt := protocol.New(memstore.New(&memstore.Config{Now: clock.Now}), nil)
			defer rt.Close(ctx)
			k := holdKey(t)
			req := protocol.AcquireRequest{Key: k, Owner: "a", TTL: 300 * time.Millisecond, RequestID: "a-1"}
			if res, err := rt.Acquire(ctx, req); err != nil || res.Lease.Token != 1 {
				t.Fatalf("a's acquire: %v, %v; want token 1", res.Lease, err)
			}
			c.after(t, rt, clock, k)

			h, err := protocol.Hold(ctx, rt, req, nil)
			if h != nil {
				defer h.Release(ctx)
				t.Fatalf("Hold of a replayed acquire that is no longer held returned a Held with token %d (context error %v)",
					h.Token(), h.Context().Err())
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "new request id") {
				t.Fatalf("Hold: %v, want an error matching %v that says to acquire with a new request id", err, c.want)
			}
		})
	}
}

// A replayed acquire that is still live is confirmed by exactly one renew,
// under a request id of its own, and the Held carries the renewed lease.
func TestHoldConfirmsAReplayedAcquireWithOneRenew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newManualClock()
	cb := &countingBackend{Backend: memstore.New(&memstore.Config{Now: clock.Now})}
	rt := protocol.New(cb, nil)
	defer rt.Close(ctx)
	k := holdKey(t)
	req := protocol.AcquireRequest{Key: k, Owner: "a", TTL: time.Minute, RequestID: "a-1"}
	first, err := rt.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)

	h, err := protocol.Hold(ctx, rt, req, nil)
	if err != nil {
		t.Fatalf("Hold of a live replayed acquire: %v", err)
	}
	defer h.Release(ctx)
	ids := cb.renews()
	if len(ids) != 1 {
		t.Fatalf("Hold sent %d renewals before returning, want exactly 1 to confirm the replay", len(ids))
	}
	if ids[0] == "" || ids[0] == req.RequestID {
		t.Fatalf("the confirming renew used request id %q, want a fresh one", ids[0])
	}
	got, wantRenewed := h.Lease(), clock.Now()
	if got.Token != first.Lease.Token || h.Token() != first.Lease.Token {
		t.Fatalf("Held token %d (lease %d), want %d", h.Token(), got.Token, first.Lease.Token)
	}
	if !got.RenewedAt.Equal(wantRenewed) || !got.ExpiresAt.Equal(wantRenewed.Add(req.TTL)) {
		t.Fatalf("Held lease renewed at %v expiring %v, want the confirming renew's (%v, %v)",
			got.RenewedAt, got.ExpiresAt, wantRenewed, wantRenewed.Add(req.TTL))
	}
	if !got.AcquiredAt.Equal(first.Lease.AcquiredAt) {
		t.Fatalf("Held lease acquired at %v, want %v", got.AcquiredAt, first.Lease.AcquiredAt)
	}
}

// The local deadline of a confirmed replay runs from the confirmation: the
// Held outlives the replayed acquire's own expiry while renewals fail, and
// gives up before the confirmed lease runs out.
func TestHoldMeasuresAReplayFromItsConfirmation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fb := &flakyBackend{Backend: memstore.New(nil)}
	rt := protocol.New(fb, nil)
	defer rt.Close(ctx)
	const ttl, every = 2 * time.Second, 200 * time.Millisecond
	req := protocol.AcquireRequest{Key: holdKey(t), Owner: "a", TTL: ttl, RequestID: "a-1"}
	first, err := rt.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2)

	confirm := time.Now()
	h, err := protocol.Hold(ctx, rt, req, &protocol.HoldConfig{RenewEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	fb.failing.Store(true)
	confirmed := h.Lease().ExpiresAt
	<-h.Context().Done()
	lostAt := time.Now()
	<-h.Done()
	if !errors.Is(context.Cause(h.Context()), protocol.ErrUnavailable) {
		t.Fatalf("cause %v, want lost with unavailable", context.Cause(h.Context()))
	}
	if !lostAt.After(first.Lease.ExpiresAt) {
		t.Fatalf("gave up at %v, before the replayed acquire's expiry %v: the deadline was not measured from the confirmation",
			lostAt, first.Lease.ExpiresAt)
	}
	if !lostAt.Before(confirmed) {
		t.Fatalf("context cancelled at %v, after the confirmed lease expired at %v", lostAt, confirmed)
	}
	if lostAt.Sub(confirm) > ttl {
		t.Fatalf("gave up %v after the confirmation, longer than the TTL %v", lostAt.Sub(confirm), ttl)
	}
}

// When the renew confirming a replay cannot answer, the outcome is unknown:
// Hold reports it and returns no Held.
func TestHoldReportsAnUnconfirmedReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fb := &flakyBackend{Backend: memstore.New(nil)}
	rt := protocol.New(fb, nil)
	defer rt.Close(ctx)
	req := protocol.AcquireRequest{Key: holdKey(t), Owner: "a", TTL: time.Minute, RequestID: "a-1"}
	if _, err := rt.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	fb.failing.Store(true)
	h, err := protocol.Hold(ctx, rt, req, nil)
	if h != nil {
		defer h.Release(ctx)
		t.Fatalf("Hold returned a Held with token %d although the replay could not be confirmed", h.Token())
	}
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "same request id") {
		t.Fatalf("Hold: %v, want unavailable advising a retry with the same request id", err)
	}
	// Once the store answers again, the same request id is confirmed.
	fb.failing.Store(false)
	h, err = protocol.Hold(ctx, rt, req, nil)
	if err != nil {
		t.Fatalf("Hold after the outage: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A revoke through another handle (another process's connection) reaches
// the Held's context at once, not at the next renewal; the lease's own
// release does not count as a loss.
func TestHoldHearsARevokeAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.NewStore(nil)
	rt, other := protocol.New(store.Handle(), nil), protocol.New(store.Handle(), nil)
	defer rt.Close(ctx)
	defer other.Close(ctx)
	k := holdKey(t)
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // not lost while held
	if h.Context().Err() != nil {
		t.Fatalf("context ended while held: %v", context.Cause(h.Context()))
	}
	start := time.Now()
	if _, err := other.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(2 * time.Second): // the next renewal is 20 s away
		t.Fatal("the revoke did not reach the holder before its next renewal")
	}
	t.Logf("revoke to context done: %v", time.Since(start))
	if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrNotFound) {
		t.Fatalf("cause %v, want lost with not_found", cause)
	}
	<-h.Done()

	h2, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if cause := context.Cause(h2.Context()); !errors.Is(cause, context.Canceled) || errors.Is(cause, protocol.ErrLeaseLost) {
		t.Fatalf("cause after the holder's own release %v, want context.Canceled", cause)
	}
}

// A Held is lost when its lease would run out by the local clock, whatever
// its renewals do: a renewal that hangs longer than the lease has left (a
// RenewTimeout above the TTL) does not keep the context live; it waited a
// minute, far past the bound below, on the old code. (A RenewEvery at or
// above the TTL, a first renewal due after the lease ran out, is refused
// by Hold: TestHoldRefusesAConfigThatCannotKeepTheLease.)
func TestHoldLosesAtTheLocalDeadline(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	cases := []struct {
		name string
		hang bool
		cfg  protocol.HoldConfig
	}{
		{"a renewal hangs", true, protocol.HoldConfig{RenewEvery: ttl / 3, RenewTimeout: time.Minute}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			fb := &flakyBackend{Backend: memstore.New(nil)}
			fb.hanging.Store(c.hang)
			rt := protocol.New(fb, nil)
			defer rt.Close(ctx)
			h, err := protocol.Hold(ctx, quietStore{rt}, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: ttl}, &c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			expires := h.Lease().ExpiresAt
			select {
			case <-h.Context().Done():
			case <-time.After(30 * time.Second):
				t.Fatalf("context still live %v after the lease expired at %v", time.Since(expires), expires)
			}
			<-h.Done()
			if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) {
				t.Fatalf("cause %v, want ErrLeaseLost", cause)
			}
		})
	}
}

// lostAcquire commits the first acquire and answers it unavailable, as a
// connection that breaks after the commit does; it records the request id
// the acquire carried.
type lostAcquire struct {
	protocol.Backend
	lost atomic.Bool
	id   atomic.Value // string
}

func (b *lostAcquire) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := b.Backend.Acquire(ctx, req)
	if err == nil && b.lost.CompareAndSwap(false, true) {
		b.id.Store(req.RequestID)
		return protocol.Result{}, &protocol.Error{Op: protocol.OpAcquire, Status: protocol.StatusUnavailable, Message: "connection lost after the commit"}
	}
	return res, err
}

// Hold without a request id whose acquire's outcome is unknown names the
// request id it made, so that the caller can call Hold again with it and
// learn the outcome (here: the lease was taken, and the retry holds it)
// instead of meeting its own lease as a conflict until it runs out.
func TestHoldNamesTheRequestIDOfAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &lostAcquire{Backend: memstore.New(nil)}
	rt := protocol.New(b, nil)
	defer rt.Close(ctx)
	req := protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: time.Minute}
	h, err := protocol.Hold(ctx, rt, req, nil)
	if h != nil || !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Hold: %v, %v; want unavailable", h, err)
	}
	id, _ := b.id.Load().(string)
	if id == "" || !strings.Contains(err.Error(), id) {
		t.Fatalf("Hold's error %q does not name the request id %q of the acquire whose outcome is unknown", err, id)
	}
	req.RequestID = id
	h, err = protocol.Hold(ctx, rt, req, nil)
	if err != nil {
		t.Fatalf("Hold again with request id %s: %v", id, err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
