package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A worker takes a lease, renews it while it works, and releases it. The
// fencing token goes with every write to the resource the lease protects.
//
// The examples run over the in-memory backend with a fixed clock so that
// their output is stable; a service would open a SQL backend instead.
func Example_lifecycle() {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	store := protocol.New(memstore.New(&memstore.Config{Now: clock}), nil)
	defer store.Close(ctx)

	key := protocol.Key{Namespace: "scans", Name: "target-42"}
	res, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: 30 * time.Second})
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	lease := res.Lease
	fmt.Println(res.Status, "token", lease.Token, "until", lease.ExpiresAt.Format(time.TimeOnly))

	now = now.Add(20 * time.Second) // some work later
	res, err = store.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "worker-1", Token: lease.Token, TTL: 30 * time.Second})
	if err != nil {
		fmt.Println("renew:", err)
		return
	}
	fmt.Println(res.Status, "token", res.Lease.Token, "until", res.Lease.ExpiresAt.Format(time.TimeOnly))

	res, err = store.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: lease.Token})
	if err != nil {
		fmt.Println("release:", err)
		return
	}
	fmt.Println(res.Status, "token", res.Lease.Token)

	_, err = store.Get(ctx, protocol.GetRequest{Key: key})
	fmt.Println("get after release:", errors.Is(err, protocol.ErrNotFound))
	// Output:
	// acquired token 1 until 03:04:35
	// renewed token 1 until 03:04:55
	// released token 1
	// get after release: true
}

// A second worker asking for a held key gets a conflict: match it with
// errors.Is and read the holder from the *protocol.Error (or the Result).
func ExampleError_conflict() {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	store := protocol.New(memstore.New(&memstore.Config{Now: func() time.Time { return now }}), nil)
	defer store.Close(ctx)

	key := protocol.Key{Namespace: "scans", Name: "target-42"}
	if _, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: time.Minute}); err != nil {
		fmt.Println("acquire:", err)
		return
	}

	_, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-2", TTL: time.Minute})
	switch {
	case errors.Is(err, protocol.ErrConflict):
		var e *protocol.Error
		if errors.As(err, &e) {
			fmt.Printf("held by %s with token %d until %s\n", e.Lease.Owner, e.Lease.Token, e.Lease.ExpiresAt.Format(time.TimeOnly))
		}
		fmt.Println("status:", protocol.StatusOf(err))
	case err != nil:
		fmt.Println("acquire failed:", err)
	default:
		fmt.Println("acquired")
	}
	// Output:
	// held by worker-1 with token 1 until 03:05:05
	// status: conflict
}
