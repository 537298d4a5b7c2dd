package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A unit test of code that takes leases runs it over the in-memory store,
// with a clock it controls.
func Example() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	store := protocol.New(memstore.New(&memstore.Config{Now: func() time.Time { return now }}), nil)
	defer store.Close(ctx)

	key := protocol.Key{Namespace: "scans", Name: "shard-7"}
	res, _ := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: 30 * time.Second})
	fmt.Println(res.Status, res.Lease.Token)

	_, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-2", TTL: 30 * time.Second})
	fmt.Println(err)

	now = now.Add(30 * time.Second) // worker-1 paused past its lease
	res, _ = store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-2", TTL: 30 * time.Second})
	fmt.Println(res.Status, res.Lease.Token)

	_, err = store.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "worker-1", Token: 1, TTL: 30 * time.Second})
	fmt.Println(err)
	// Output:
	// acquired 1
	// lease: acquire scans/shard-7: conflict: held by worker-1 with token 1 until 2030-01-01T00:00:30Z
	// acquired 2
	// lease: renew scans/shard-7: stale_token: a newer lease holds the key (token 2)
}
