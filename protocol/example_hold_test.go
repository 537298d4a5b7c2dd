package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A service holds a lease while it works: Hold renews it in the background
// (every TTL/3) and cancels h.Context() if it is lost. Shutdown (here a
// cancelled context, as signal.NotifyContext gives on Ctrl-C) stops the
// work, and the deferred Release still gives the lease back.
func ExampleHold() {
	store := protocol.New(memstore.New(nil), nil)
	defer store.Close(context.Background())

	ctx, stop := context.WithCancel(context.Background()) // signal.NotifyContext(...) in a service
	defer stop()
	key := protocol.Key{Namespace: "scans", Name: "target-42"}
	h, err := protocol.Hold(ctx, store, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: 30 * time.Second}, nil)
	if err != nil {
		fmt.Println("hold:", err) // errors.Is(err, protocol.ErrConflict) when someone else holds it
		return
	}
	fmt.Println("holding", key, "with token", h.Token())

	work := func(ctx context.Context, token int64) {
		stop() // the work runs until shutdown...
		<-ctx.Done()
		fmt.Println("work stopped:", context.Cause(ctx))
	}
	work(h.Context(), h.Token())

	if err := h.Release(ctx); err != nil { // ctx is cancelled: Release still releases
		fmt.Println("release:", err)
	}
	_, err = store.Get(context.Background(), protocol.GetRequest{Key: key})
	fmt.Println("released:", errors.Is(err, protocol.ErrNotFound))
	// Output:
	// holding scans/target-42 with token 1
	// work stopped: context canceled
	// released: true
}
