package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Backend.Close's doc: "Close is idempotent; operations after Close fail
// with unavailable". A Backend from New leaves the borrowed *sql.DB open,
// and a write after Close must still be refused, not re-prepared on that
// db and committed: the caller closed the backend to stop it writing.
func TestWritesAfterCloseOfABorrowingBackendAreRefused(t *testing.T) {
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
		if protocol.StatusOf(err) != protocol.StatusUnavailable {
			t.Errorf("%s after Close: status %q, err %v; want unavailable", name, res.Status, err)
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
