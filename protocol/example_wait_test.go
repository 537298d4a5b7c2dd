package protocol_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A second worker waits for a key the first one holds: AcquireWait sleeps
// until the holder releases (the store signals it) or its lease expires,
// then takes the key with a greater token.
func ExampleAcquireWait() {
	store := protocol.New(memstore.New(nil), nil)
	defer store.Close(context.Background())
	ctx := context.Background()
	key := protocol.Key{Namespace: "jobs", Name: "nightly-report"}

	first, _ := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: time.Hour})
	waiting := make(chan struct{})
	go func() {
		<-waiting // worker-2 is asleep: worker-1 finishes and lets go
		_, _ = store.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: first.Lease.Token})
	}()

	wctx, cancel := context.WithTimeout(ctx, time.Minute) // give up (conflict) after a minute
	defer cancel()
	res, err := protocol.AcquireWait(wctx, store, protocol.AcquireRequest{Key: key, Owner: "worker-2", TTL: time.Minute},
		&protocol.WaitConfig{Waiting: func(holder protocol.Lease) {
			fmt.Println("waiting for", holder.Owner)
			close(waiting)
		}})
	if err != nil {
		fmt.Println("gave up:", err) // errors.Is(err, protocol.ErrConflict): still held when wctx ended
		return
	}
	fmt.Println(res.Lease.Owner, "took", key, "with token", res.Lease.Token, "after token", first.Lease.Token)
	// Output:
	// waiting for worker-1
	// worker-2 took jobs/nightly-report with token 2 after token 1
}
