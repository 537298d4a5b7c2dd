package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// A wait for a key ends when its Runtime is closed, as a Held of that
// runtime does (its context ends at once with a cause matching ErrClosed):
// here the store cannot signal (behind a transaction pooler without
// Config.ListenDSN), so nothing but the runtime's close can wake the
// waiter, asleep until the holder's expiry or its Recheck (1m). It must
// answer closed within seconds of Close, not sleep on past it.
func TestWaitEndsWhenItsRuntimeIsClosed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	holder := protocol.New(openBackend(t, dsn, nil), nil)
	defer holder.Close(context.Background())
	rt := protocol.New(openBackend(t, dsn+"&pooler=transaction", nil), nil)
	k := key("job")
	if _, err := holder.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	asleep := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := rt.AcquireWait(wctx, protocol.AcquireRequest{Key: k, Owner: "w2", TTL: time.Hour},
			&protocol.WaitConfig{Recheck: time.Minute, Waiting: func(protocol.Lease) {
				select {
				case asleep <- struct{}{}:
				default:
				}
			}})
		done <- err
	}()
	select {
	case <-asleep:
	case err := <-done:
		t.Fatalf("the wait ended before it slept: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never met the holder")
	}
	if err := rt.Close(ctxT(t)); err != nil {
		t.Fatalf("close: %v", err)
	}
	closed := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, protocol.ErrClosed) {
			t.Fatalf("the wait ended with %v, want an error matching ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		cancel() // else it ends at its recheck, a minute after it fell asleep
		<-done
		t.Fatalf("the wait of a runtime closed while it slept had not ended %s after the close: "+
			"Close does not wake a waiter (it sleeps on until its recheck, 1m), as it ends a Held at once", time.Since(closed).Round(time.Second))
	}
}
