package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// readingBackend is a memstore handle that tells each get it answered on
// gets (without blocking): the reads WatchLease makes, the first once its
// subscription is live.
type readingBackend struct {
	*memstore.Backend
	gets chan struct{}
}

func (b readingBackend) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	res, err := b.Backend.Get(ctx, req)
	select {
	case b.gets <- struct{}{}:
	default:
	}
	return res, err
}

// A store closed under a lease's watch answers closed to the get its
// close signal brings: it never answers again, so the lease can be
// neither confirmed nor renewed. WatchLease reports that as the end at
// once (why matching ErrClosed), and a Hold through the backend itself
// (no Runtime, whose Close ends its Helds on its own) hears it so, with a
// cause matching ErrLeaseLost and ErrClosed, not at its next renewal.
func TestWatchLeaseHearsTheStoreClose(t *testing.T) {
	t.Parallel()
	const (
		ttl   = time.Minute
		bound = time.Second // far below the TTL, and the renewals every 20s
	)
	waitLive := func(t *testing.T, b readingBackend) {
		t.Helper()
		select {
		case <-b.gets:
		case <-time.After(5 * time.Second):
			t.Fatal("the watch made no get within 5s: its subscription is not live")
		}
	}
	t.Run("watch", func(t *testing.T) {
		t.Parallel()
		b := readingBackend{Backend: memstore.New(nil), gets: make(chan struct{}, 1)}
		defer b.Close(context.Background())
		res, err := b.Acquire(t.Context(), protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: ttl, RequestID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		lost := make(chan error, 2)
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			protocol.WatchLease(ctx, b, *res.Lease, time.Second, func(why error) { lost <- why })
		}()
		waitLive(t, b)
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case why := <-lost:
			if !errors.Is(why, protocol.ErrClosed) {
				t.Fatalf("lost with %v, want a why matching ErrClosed", why)
			}
		case <-time.After(bound):
			t.Fatalf("WatchLease did not report the end within %v of the store's Close (TTL %v): it took the closed answer for no answer", bound, ttl)
		}
		select {
		case <-returned:
		case <-time.After(bound):
			t.Fatalf("WatchLease did not return within %v of reporting the end", bound)
		}
	})
	t.Run("hold", func(t *testing.T) {
		t.Parallel()
		b := readingBackend{Backend: memstore.New(nil), gets: make(chan struct{}, 1)}
		defer b.Close(context.Background())
		h, err := protocol.Hold(t.Context(), b, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: ttl},
			&protocol.HoldConfig{RenewEvery: ttl / 3})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.Release(context.Background()); <-h.Done() }()
		waitLive(t, b)
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.Context().Done():
		case <-time.After(bound):
			t.Fatalf("the holder did not hear within %v that the store was closed (TTL %v, next renewal in %v)", bound, ttl, ttl/3)
		}
		cause := context.Cause(h.Context())
		if !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrClosed) {
			t.Fatalf("cause %v, want one matching ErrLeaseLost and ErrClosed", cause)
		}
	})
}
