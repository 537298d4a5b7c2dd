package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestForeignTriggerOnATableNamedInAnotherCaseIsRefused creates, from a
// second handle on the file, a trigger the migrations did not make on
// the store's lease table, naming the table as SQLite lets one name it:
// in capitals (table names are case-insensitive, and sqlite_schema keeps
// the trigger's tbl_name as written). It rewrites every acquired lease's
// owner, so that the holder an acquire answered is not the one a get
// shows. DESIGN.md: Open, New and Health refuse a trigger on the store's
// tables that its migrations did not make; they refuse the same trigger
// on leasestore_leases (TestForeignTriggersOnTheStoreAreRefused), and
// the prune's own look at the trail's triggers (qTrailTriggers) matches
// the table's name without case.
func TestForeignTriggerOnATableNamedInAnotherCaseIsRefused(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	other := otherHandle(t, path)
	if _, err := other.ExecContext(ctxT(t), `CREATE TRIGGER reassign AFTER INSERT ON LEASESTORE_LEASES
BEGIN UPDATE leasestore_leases SET owner = 'mallory' WHERE namespace = NEW.namespace AND name = NEW.name; END`); err != nil {
		t.Fatal(err)
	}

	health := b.Health(ctxT(t))
	again, openErr := sqlite.Open(ctxT(t), path, nil)
	if openErr == nil {
		defer again.Close(context.Background())
	}
	if health != nil && openErr != nil {
		expectStatus(t, "health of the running backend", health, protocol.StatusUnavailable, "reassign")
		expectStatus(t, "open", openErr, protocol.StatusUnavailable, "reassign")
		return
	}
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "alice", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	got, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("k")})
	wantStatus(t, "get", got, err, protocol.StatusFound)
	t.Fatalf("a trigger the migrations did not make, on LEASESTORE_LEASES, was not refused (health: %v; open: %v): "+
		"acquire answered holder %q, get shows holder %q", health, openErr, res.Lease.Owner, got.Lease.Owner)
}
