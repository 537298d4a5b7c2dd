package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A change is never committed without its audit record (DESIGN.md: the
// record is written in the same atomic step), also when a trigger put on
// the trail after Open, from another handle (an operator's sqlite3 shell),
// drops the record of one key's changes (RAISE(IGNORE)), which Open and
// Health refuse but a write in between meets: in a coalesced batch the
// member whose record was dropped must fail alone (its savepoint rolled
// back, no lease row), as the PostgreSQL backend's batch refuses it
// (TestCoalescedChangesAreNeverCommittedWithoutTheirRecord), while the
// other members are acquired, each with its record.
func TestCoalescedChangeWithoutItsRecordIsRefused(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	raw := rawDB(t, path)
	b := open(t, path, nil)
	if _, err := raw.Exec(`CREATE TRIGGER dba_drop_k7 BEFORE INSERT ON leasestore_audit
		WHEN NEW.name = 'k7' BEGIN SELECT RAISE(IGNORE); END`); err != nil {
		t.Fatal(err)
	}
	release := sqlite.HoldWriter(b)
	defer release()
	type answer struct {
		name string
		res  protocol.Result
		err  error
	}
	names := []string{"k1", "k7", "k2"}
	answers := make(chan answer, len(names))
	for i, name := range names {
		go func() {
			res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: "a-" + name})
			answers <- answer{name, res, err}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for sqlite.WriteQueueLen(b) != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not queue", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	before := sqlite.WriteBatches(b)
	release()
	got := map[string]answer{}
	for range names {
		a := <-answers
		got[a.name] = a
	}
	if n := sqlite.WriteBatches(b) - before; n != 1 {
		t.Fatalf("%d batches ran, want the three acquires in one", n)
	}
	rows := func(q, name string) int {
		var n int
		if err := raw.QueryRowContext(context.Background(), q, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, name := range names {
		a := got[name]
		leases := rows(`SELECT count(*) FROM leasestore_leases WHERE namespace = 'ns' AND name = ?`, name)
		records := rows(`SELECT count(*) FROM leasestore_audit WHERE namespace = 'ns' AND name = ?`, name)
		if name != "k7" {
			if a.err != nil || a.res.Status != protocol.StatusAcquired || leases != 1 || records != 1 {
				t.Errorf("%s: %+v %v, %d lease rows, %d records; want acquired with one of each", name, a.res, a.err, leases, records)
			}
			continue
		}
		if leases != records {
			t.Errorf("k7 (its record dropped by a trigger): answered %s (%v) with %d lease rows committed and %d records; "+
				"want it refused and nothing of it committed", a.res.Status, a.err, leases, records)
		}
		if a.err == nil && a.res.Status == protocol.StatusAcquired {
			t.Errorf("k7: answered acquired (token %d) though its record was not written", a.res.Lease.Token)
		}
	}
}
