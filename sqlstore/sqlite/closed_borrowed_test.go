package sqlite_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Backend.Close's doc: "every call from then on ... fails with closed".
// A Backend from New leaves the borrowed *sql.DB open, and a write after
// Close must still be refused, not re-prepared on that db and committed:
// the caller closed the backend to stop it writing.
func TestWritesAfterCloseOfABorrowingBackendAreRefused(t *testing.T) {
	ctx := ctxT(t)
	b, db, held := closedBorrowingBackend(t)
	ops := map[string]func() (protocol.Result, error){
		"acquire": func() (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key("a"), Owner: "w", TTL: time.Minute, RequestID: "r1"})
		},
		"renew": func() (protocol.Result, error) {
			return b.Renew(ctx, protocol.RenewRequest{Key: key("held"), Owner: "w", Token: held.Lease.Token, TTL: time.Minute, RequestID: "r2"})
		},
		"revoke": func() (protocol.Result, error) {
			return b.Revoke(ctx, protocol.RevokeRequest{Key: key("held"), Actor: "op", Reason: "test", RequestID: "r3"})
		},
	}
	for _, name := range []string{"acquire", "renew", "revoke"} {
		res, err := ops[name]()
		if protocol.StatusOf(err) != protocol.StatusClosed {
			t.Errorf("%s after Close: status %q, err %v; want closed", name, res.Status, err)
		}
	}
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_audit`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("the closed backend wrote: %d audit records, want 1 (the acquire before Close)", rows)
	}
}

// Every other operation of a Backend from New is refused after Close too,
// reads included: the borrowed *sql.DB still answers, and a read that
// does not go through a closed statement would be served from it.
func TestEveryOperationAfterCloseOfABorrowingBackendIsRefused(t *testing.T) {
	ctx := ctxT(t)
	b, db, held := closedBorrowingBackend(t)
	ops := map[string]func() error{
		"get": func() error { _, err := b.Get(ctx, protocol.GetRequest{Key: key("held")}); return err },
		"list": func() error {
			_, err := b.List(ctx, protocol.ListRequest{Namespace: "ns"})
			return err
		},
		"audit":      func() error { _, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns"}); return err },
		"namespaces": func() error { _, err := b.Namespaces(ctx, "", 10); return err },
		"health":     func() error { return b.Health(ctx) },
		"release": func() error {
			_, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("held"), Owner: "w", Token: held.Lease.Token, RequestID: "r1"})
			return err
		},
		"renew many": func() error {
			_, err := b.RenewMany(ctx, []protocol.RenewRequest{{Key: key("held"), Owner: "w", Token: held.Lease.Token, TTL: time.Minute, RequestID: "r2"}})
			return err
		},
		"sweep": func() error { _, err := b.Sweep(ctx, 10, 0); return err },
		"raise": func() error { _, err := b.RaiseTokens(ctx, 1000); return err },
		"prune": func() error {
			_, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now().Add(-time.Hour), Actor: "op", RequestID: "r3"})
			return err
		},
	}
	for name, op := range ops {
		if err := op(); protocol.StatusOf(err) != protocol.StatusClosed {
			t.Errorf("%s after Close: %v; want closed", name, err)
		}
	}
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_audit`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("the closed backend wrote: %d audit records, want 1", rows)
	}
}

// closedBorrowingBackend returns a Backend from New on a migrated file's
// *sql.DB (db, left open), closed once it held the lease held of key
// "held" (request id r0).
func closedBorrowingBackend(t *testing.T) (*sqlite.Backend, *sql.DB, protocol.Result) {
	t.Helper()
	ctx := ctxT(t)
	db := rawDB(t, migratedFile(t))
	b, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Minute, RequestID: "r0"})
	if err != nil || held.Status != protocol.StatusAcquired {
		t.Fatalf("acquire before Close: %v %v", held.Status, err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return b, db, held
}
