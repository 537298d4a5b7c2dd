package protocol_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// hungSubscribe is a backend whose Subscribe does not answer until its
// context ends (a listener connection that hangs), or the test ends.
type hungSubscribe struct {
	*memstore.Backend
	entered chan struct{}
	end     chan struct{}
}

func (b *hungSubscribe) Subscribe(ctx context.Context, _ protocol.Key) (<-chan struct{}, func(), error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-b.end:
		return nil, nil, errors.New("the test ended")
	}
}

// A Runtime's Close ends every call of the runtime under way, so that it
// can close the backend: a subscription that hangs (AcquireWait's, made
// under a context without a deadline) is cut short as Close starts, the
// waiter answers closed at once, as AcquireWait's doc says ("A
// Runtime.Close of s ends the wait at once"), and Close does not wait for
// it until its own context ends.
func TestCloseEndsAHungSubscription(t *testing.T) {
	t.Parallel()
	b := &hungSubscribe{Backend: memstore.New(nil), entered: make(chan struct{}, 1), end: make(chan struct{})}
	var endOnce sync.Once
	end := func() { endOnce.Do(func() { close(b.end) }) }
	t.Cleanup(end)
	rt := protocol.New(b, nil)
	ctx := context.Background()
	key := protocol.Key{Namespace: "ns", Name: "k"}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := rt.AcquireWait(ctx, protocol.AcquireRequest{Key: key, Owner: "b", TTL: time.Minute}, nil)
		waited <- err
	}()
	<-b.entered
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := rt.Close(cctx); err != nil {
		t.Errorf("Close: %v after %s; want nil, the hung subscription cut short", err, time.Since(start).Round(time.Millisecond))
	}
	select {
	case err := <-waited:
		if !errors.Is(err, protocol.ErrClosed) {
			t.Errorf("AcquireWait answered %v; want closed", err)
		}
	case <-time.After(time.Second):
		t.Errorf("AcquireWait did not return within 1s of Close; want closed at once")
		end()
		<-waited
	}
}

// The making of a subscription is bounded by the runtime's default
// deadline when the caller's context has none: a waiter under such a
// context whose subscription hangs falls back to sleeping until the
// holder's expiry, and takes the key then.
func TestHungSubscriptionGetsTheDefaultDeadline(t *testing.T) {
	t.Parallel()
	b := &hungSubscribe{Backend: memstore.New(nil), entered: make(chan struct{}, 1), end: make(chan struct{})}
	var endOnce sync.Once
	end := func() { endOnce.Do(func() { close(b.end) }) }
	t.Cleanup(end)
	rt := protocol.New(b, &protocol.Config{DefaultTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	ctx := context.Background()
	key := protocol.Key{Namespace: "ns", Name: "k"}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "a", TTL: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := rt.AcquireWait(ctx, protocol.AcquireRequest{Key: key, Owner: "b", TTL: time.Minute}, nil)
		waited <- err
	}()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("AcquireWait: %v; want the key once the holder's lease ran out", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("AcquireWait still waits 5s after the holder's lease ran out: its subscription hangs")
		end()
		<-waited
	}
}
