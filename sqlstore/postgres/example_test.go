package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// Open a backend on a migrated schema, wrap it in a runtime, and take,
// renew and release a lease. (Without a server this example cannot run; it
// is compiled as documentation.)
func ExampleOpen() {
	ctx := context.Background()
	// The schema comes from the DSN's search_path; run `leasectl migrate up`
	// against the same DSN first.
	b, err := postgres.Open(ctx, os.Getenv("LEASESTORE_DSN"), &postgres.Config{ApplicationName: "scanner"})
	if err != nil {
		log.Fatal(err) // never shows the DSN's password
	}
	store := protocol.New(b, nil) // the runtime owns b: closing it closes the pool
	defer store.Close(ctx)

	key := protocol.Key{Namespace: "scans", Name: "10.0.0.0/24"}
	res, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: 30 * time.Second})
	if err != nil {
		log.Fatal(err) // errors.Is(err, protocol.ErrConflict) when someone holds it
	}
	token := res.Lease.Token // hand it to the resource, which refuses older tokens
	if _, err := store.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "worker-1", Token: token, TTL: 30 * time.Second}); err != nil {
		log.Fatal(err)
	}
	_, err = store.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: token})
	fmt.Println(err)
}
