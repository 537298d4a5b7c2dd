package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A Subscribe still waiting for the listener connection when the store
// closes answers closed, as one made after Close does, and matches that
// one sentinel (protocol's errors match exactly one): protocol.WatchLease
// stops on closed, while unavailable sends it back to subscribe again.
// The listener here is a server that accepts and never answers, so the
// subscription is in flight when the runtime's Close, its context done,
// closes the backend. Its error was the backend's closed error wrapped once
// more as unavailable ("lease: unavailable: postgres: lease: closed:
// ..."), matching ErrUnavailable and ErrClosed at once.
func TestSubscribeInFlightAtCloseAnswersClosed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			if len(conns) == 1 {
				close(accepted)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	silent := fmt.Sprintf("postgres://root@%s/test?sslmode=disable&connect_timeout=60", ln.Addr())
	rt := protocol.New(openBackend(t, pgtest.MigratedDSN(t), &postgres.Config{ListenDSN: silent}), nil)
	k := keysIn(pgtest.Namespace())("k")
	errs := make(chan error, 1)
	go func() {
		_, cancel, err := rt.Subscribe(ctxT(t), k)
		if err == nil {
			cancel()
		}
		errs <- err
	}()
	select {
	case <-accepted:
	case <-time.After(opTimeout):
		t.Fatal("the listener never connected")
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = rt.Close(closeCtx) // the subscription is in flight: Close gives up waiting for it and closes the backend
	select {
	case err = <-errs:
	case <-time.After(opTimeout):
		t.Fatal("Subscribe did not return after Close")
	}
	if got := protocol.StatusOf(err); got != protocol.StatusClosed || !errors.Is(err, protocol.ErrClosed) || errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Subscribe in flight at Close: status %q, %v; want status closed only", got, err)
	}
}
