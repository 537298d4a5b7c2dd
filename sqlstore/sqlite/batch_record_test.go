package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	names := []string{"k1", "k7", "k2"}
	got := acquireInOneBatch(t, b, names)
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

// A lone change (no batch: its own transaction) whose audit record a
// trigger added after Open drops is refused as a coalesced one is, naming
// the trigger as the cause and the fix, and nothing of it is committed:
// acquire (no lease row, no token spent), renew, release and revoke (the
// lease row as it was), and a renewal of RenewMany, which fails alone.
func TestLoneChangeWithoutItsRecordIsRefused(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	raw := rawDB(t, path)
	b := open(t, path, nil)
	ctx := ctxT(t)
	held := map[string]protocol.Result{}
	for _, name := range []string{"k7", "k8"} {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: "a-" + name})
		if err != nil || res.Status != protocol.StatusAcquired {
			t.Fatalf("acquire %s: %+v %v", name, res, err)
		}
		held[name] = res
	}
	if _, err := raw.Exec(`CREATE TRIGGER dba_drop_k7 BEFORE INSERT ON leasestore_audit
		WHEN NEW.name IN ('k7', 'k9') BEGIN SELECT RAISE(IGNORE); END`); err != nil {
		t.Fatal(err)
	}
	row := func(name string) (n int, expires int64) {
		if err := raw.QueryRowContext(ctx, `SELECT count(*), coalesce(max(expires_at), 0) FROM leasestore_leases
			WHERE namespace = 'ns' AND name = ?`, name).Scan(&n, &expires); err != nil {
			t.Fatal(err)
		}
		return n, expires
	}
	records := func(name string) (n int) {
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_audit WHERE namespace = 'ns' AND name = ?`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var fencing int64
	if err := raw.QueryRowContext(ctx, `SELECT max(last_token) FROM leasestore_fencing`).Scan(&fencing); err != nil {
		t.Fatal(err)
	}
	_, expires := row("k7")
	tok := held["k7"].Lease.Token

	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k9"), Owner: "o", TTL: time.Minute, RequestID: "a-k9"})
	expectUnavailable(t, fmt.Sprintf("acquire of k9 (its record dropped): answered %s", res.Status), err, "audit record", "DROP TRIGGER")
	var after int64
	if err := raw.QueryRowContext(ctx, `SELECT max(last_token) FROM leasestore_fencing`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if n, _ := row("k9"); n != 0 || after != fencing {
		t.Errorf("refused acquire of k9: %d lease rows, fencing counter %d (was %d); want none and unchanged", n, after, fencing)
	}

	res, err = b.Renew(ctx, protocol.RenewRequest{Key: key("k7"), Owner: "o", Token: tok, TTL: time.Hour, RequestID: "r-k7"})
	expectUnavailable(t, fmt.Sprintf("renew of k7 (its record dropped): answered %s", res.Status), err, "audit record", "DROP TRIGGER")
	if n, e := row("k7"); n != 1 || e != expires {
		t.Errorf("refused renew of k7: %d lease rows expiring at %d; want its row as it was (expiring at %d)", n, e, expires)
	}

	got, err := b.RenewMany(ctx, []protocol.RenewRequest{
		{Key: key("k7"), Owner: "o", Token: tok, TTL: time.Hour, RequestID: "rm-k7"},
		{Key: key("k8"), Owner: "o", Token: held["k8"].Lease.Token, TTL: time.Hour, RequestID: "rm-k8"},
	})
	if err != nil || len(got) != 2 || got[0].Status != protocol.StatusUnavailable || got[1].Status != protocol.StatusRenewed {
		t.Errorf("RenewMany of k7 (its record dropped) and k8: %+v %v; want k7 unavailable and k8 renewed", got, err)
	}
	if n, e := row("k7"); n != 1 || e != expires {
		t.Errorf("RenewMany's refused renewal of k7: %d lease rows expiring at %d; want its row as it was (expiring at %d)", n, e, expires)
	}

	res, err = b.Release(ctx, protocol.ReleaseRequest{Key: key("k7"), Owner: "o", Token: tok, RequestID: "rel-k7"})
	expectUnavailable(t, fmt.Sprintf("release of k7 (its record dropped): answered %s", res.Status), err, "audit record", "DROP TRIGGER")
	res, err = b.Revoke(ctx, protocol.RevokeRequest{Key: key("k7"), Actor: "ops", Reason: "test", RequestID: "rev-k7"})
	expectUnavailable(t, fmt.Sprintf("revoke of k7 (its record dropped): answered %s", res.Status), err, "audit record", "DROP TRIGGER")
	if n, e := row("k7"); n != 1 || e != expires {
		t.Errorf("refused release and revoke of k7: %d lease rows expiring at %d; want its row as it was (expiring at %d)", n, e, expires)
	}
	if n := records("k7"); n != 1 {
		t.Errorf("%d records of k7, want its acquire's only", n)
	}
	if n := records("k8"); n != 2 {
		t.Errorf("%d records of k8, want its acquire's and its renewal's", n)
	}
}

// batchAnswer is the answer of one acquire of acquireInOneBatch.
type batchAnswer struct {
	res protocol.Result
	err error
}

// acquireInOneBatch acquires the keys names (owner "o", request ids
// "a-NAME") in one coalesced batch, in that order, and returns each
// answer by name.
func acquireInOneBatch(t *testing.T, b *sqlite.Backend, names []string) map[string]batchAnswer {
	t.Helper()
	release := sqlite.HoldWriter(b)
	defer release()
	type answer struct {
		name string
		batchAnswer
	}
	answers := make(chan answer, len(names))
	for i, name := range names {
		go func() {
			res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: "a-" + name})
			answers <- answer{name, batchAnswer{res, err}}
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
	got := map[string]batchAnswer{}
	for range names {
		a := <-answers
		got[a.name] = a.batchAnswer
	}
	if n := sqlite.WriteBatches(b) - before; n != 1 {
		t.Fatalf("%d batches ran, want the %d acquires in one", n, len(names))
	}
	return got
}

// A trigger added after Open whose RAISE(ROLLBACK) meets one write rolls
// back the whole transaction, which SQLite allows no savepoint to undo:
// nothing of the batch is committed and every member answers unavailable,
// naming the real cause (the trigger's message) and the fix (drop it),
// not the savepoint the batch could then no longer roll back to. A lone
// write, and a RenewMany one of whose renewals meets it (as a whole), fail
// saying the same.
func TestRollbackOfOneWriteNamesItsCause(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	raw := rawDB(t, path)
	b := open(t, path, nil)
	ctx := ctxT(t)
	k8, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k8"), Owner: "o", TTL: time.Minute, RequestID: "a-k8"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TRIGGER dba_freeze_k7 BEFORE INSERT ON leasestore_audit
		WHEN NEW.name IN ('k7', 'k8')
		BEGIN SELECT RAISE(ROLLBACK, 'dba: frozen for the audit'); END`); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		var pe *protocol.Error
		switch {
		case !errors.As(err, &pe) || pe.Status != protocol.StatusUnavailable:
			t.Errorf("%s: %v, want unavailable", what, err)
		case !strings.Contains(err.Error(), "dba: frozen for the audit") || !strings.Contains(err.Error(), "DROP TRIGGER") ||
			strings.Contains(err.Error(), "savepoint"):
			t.Errorf("%s: %q, want it to name the trigger's message and the fix (DROP TRIGGER), not a savepoint", what, err)
		}
	}
	names := []string{"k1", "k7", "k2"}
	got := acquireInOneBatch(t, b, names)
	for _, name := range names {
		a := got[name]
		check(fmt.Sprintf("%s, in the batch that k7 rolled back (answered %s)", name, a.res.Status), a.err)
		var n int
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_leases WHERE namespace = 'ns' AND name = ?`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d lease rows committed, want none (the batch was rolled back)", name, n)
		}
	}
	lone, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k7"), Owner: "o", TTL: time.Minute, RequestID: "a-k7-lone"})
	check(fmt.Sprintf("a lone acquire of k7 (answered %s)", lone.Status), err)
	got8, err := b.RenewMany(ctx, []protocol.RenewRequest{
		{Key: key("k8"), Owner: "o", Token: k8.Lease.Token, TTL: time.Hour, RequestID: "rm-k8"},
	})
	check(fmt.Sprintf("RenewMany whose renewal of k8 the trigger rolled back (%d results)", len(got8)), err)
}
