package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Create and migrate a store file from code (OpenDB, migrations.Up, New),
// then take, renew and release a lease. Every acquire of the key issues a
// greater fencing token, across releases and restarts.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "leasestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := sqlite.OpenDB(filepath.Join(dir, "leases.db")) // created when missing; WAL, synchronous=FULL
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // after the store: New borrows db and never closes it
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		log.Fatal(err) // what `leasectl migrate up` does to the file
	}
	backend, err := sqlite.New(ctx, db, nil)
	if err != nil {
		log.Fatal(err)
	}
	store := protocol.New(backend, nil) // owns backend: Close closes it
	defer store.Close(ctx)

	key := protocol.Key{Namespace: "billing", Name: "invoice-run"}
	var last int64
	for range 2 {
		res, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: 30 * time.Second})
		if err != nil {
			log.Fatal(err) // errors.Is(err, protocol.ErrConflict) when someone holds it
		}
		token := res.Lease.Token // send it with every write to the resource the lease protects
		fmt.Println(res.Status, key, "token", token, "greater than the last:", token > last)
		last = token

		res, err = store.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "worker-1", Token: token}) // keeps its TTL
		if err != nil {
			log.Fatal(err) // stale_token, expired, not_found or not_owner: stop working on the key
		}
		fmt.Println(res.Status, "token", res.Lease.Token)
		res, err = store.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: token})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Status)
	}
	// Output:
	// acquired billing/invoice-run token 1 greater than the last: true
	// renewed token 1
	// released
	// acquired billing/invoice-run token 2 greater than the last: true
	// renewed token 2
	// released
}
