package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// TestBusyWatchesLeaveStreamsForLossWatches: DESIGN.md (contract v3) says
// a holder hears of a revoke at once, from the store's signal, the
// renewal being only the fallback; over HTTP each signal is a stream, and
// the server caps its streams. A scheduler worker below its share that
// listens for busy targets' release (an optimization: a released target
// is taken sooner) holds up to 8 of those streams for as long as the
// targets stay busy. It must not take the last of them from holders that
// need one to hear a revoke: here a server capped at 8 streams, a worker
// listening for 8 busy targets, and a protocol.Hold (renewing every 20s)
// whose lease an operator revokes: the holder should hear it within 10s.
func TestBusyWatchesLeaveStreamsForLossWatches(t *testing.T) {
	served := protocol.New(memstore.New(nil), nil)
	h, err := httpapi.NewHandler(served, nil, &httpapi.Config{Logger: slog.New(slog.DiscardHandler), MaxStreams: 8})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = served.Close(ctx)
	})
	client := func() *protocol.Runtime {
		c, err := httpapi.NewClient(srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		rt := protocol.New(c, nil)
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
		return rt
	}
	ctx := context.Background()
	admin := client()
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("b%d", i)
		names = append(names, name)
		if _, err := admin.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "bw", Name: name}, Owner: "someone", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// w: the only worker, its share every target, all of them busy.
	w, err := scheduler.New(client(), "w", scheduler.Static(names...), func(ctx context.Context, _ string, _ int64) { <-ctx.Done() },
		&scheduler.Config{Namespace: "bw", TTL: time.Minute, RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return")
		}
	})
	// Wait until w's first round is done (its watches started after it).
	for deadline := time.Now().Add(15 * time.Second); w.Snapshot().LastRound.IsZero(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("w made no round within 15s")
		}
	}
	time.Sleep(time.Second) // its subscriptions made

	holder := client()
	key := protocol.Key{Namespace: "other", Name: "k"}
	held, err := protocol.Hold(ctx, holder, protocol.AcquireRequest{Key: key, Owner: "holder", TTL: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	time.Sleep(2 * time.Second) // the holder's watch tried to subscribe (and, refused, again)
	if _, err := admin.Revoke(ctx, protocol.RevokeRequest{Key: key, Actor: "op", Reason: "test", Token: held.Lease().Token}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the holder did not hear of the revoke within 10s (renewing every 20s): w, listening for %d busy targets, holds the server's 8 streams (snapshot %+v)",
			len(names), w.Snapshot())
	}
}
