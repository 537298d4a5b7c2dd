package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Read a key's trail page by page, then follow it: audit.Watch yields each
// change as it commits, oldest first, resuming after a cursor.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "leasestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store := openSQLite(ctx, filepath.Join(dir, "leases.db"))
	defer store.Close(ctx)

	key := protocol.Key{Namespace: "billing", Name: "invoice-run"}
	res, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: res.Lease.Token}); err != nil {
		log.Fatal(err)
	}

	// Every record of the key, oldest first, one page after another.
	reader := audit.RuntimeReader(store) // reads through the runtime: its deadline and observer
	// Follow makes it a follower's read: on PostgreSQL it never skips a
	// record that commits out of id order.
	q := audit.Query{Namespace: key.Namespace, Key: key.Name, Follow: true}
	for {
		page, err := reader.ReadAudit(ctx, q)
		if err != nil {
			log.Fatal(err)
		}
		for _, rec := range page.Records {
			fmt.Println(rec.Op, rec.Status, rec.Owner, rec.Token)
		}
		q.Cursor = page.Resume(q.Cursor) // past what this page read
		if page.NextCursor == "" {
			break // the end, for now
		}
	}

	// Follow the key from there on. Watch waits for the next change, so a
	// service ranges over it in a goroutine of its own until ctx ends; here
	// the change is made first and the loop stops after one record.
	if _, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-2", TTL: 30 * time.Second}); err != nil {
		log.Fatal(err)
	}
	for rec, err := range audit.Watch(ctx, reader, q, nil) {
		if err != nil {
			log.Print(err) // a failed read; Watch retries it (an invalid query or a pruned cursor ends it)
			continue
		}
		fmt.Println("followed:", rec.Op, rec.Status, rec.Owner, rec.Token)
		break
	}
	// Output:
	// acquire acquired worker-1 1
	// release released worker-1 1
	// followed: acquire acquired worker-2 2
}

// openSQLite migrates the SQLite file at path (creating it), as
// `leasectl migrate up` would, and opens a store on it.
func openSQLite(ctx context.Context, path string) *protocol.Runtime {
	db, err := sqlite.OpenDB(path)
	if err != nil {
		log.Fatal(err)
	}
	_, err = migrations.Up(ctx, migrations.SQLite, db)
	db.Close()
	if err != nil {
		log.Fatal(err)
	}
	backend, err := sqlite.Open(ctx, path, nil) // owns its *sql.DB
	if err != nil {
		log.Fatal(err)
	}
	return protocol.New(backend, nil) // owns backend: Close closes it
}
