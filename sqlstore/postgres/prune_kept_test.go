package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A prune removes records in batches, each its own transaction, so one
// that stops part way has removed the batches before it for good: it
// cannot be all or nothing, so it must say how far it got. A DBA's BEFORE
// DELETE trigger on the trail that keeps some records (returns NULL for
// them: a hold on records of interest) made a batch remove fewer records
// than it took; the prune took that batch for its last, answered success
// and recorded "removed N records before T" while records before T were
// still there, and with the kept record in its first batch stopped there,
// however long the trail. One that raises (refuses the delete) stopped the
// prune with the server's error alone, which did not say that the earlier
// batches' records were gone. Now a batch that could not delete every
// record it took removes none of them and stops the prune, naming the
// trigger; a prune that stops after batches that committed says how many
// records they removed; and the mark of what prunes removed
// (leasestore_audit_pruned, which readers behind a prune meet) is exactly
// the greatest id removed, neither past a record still there nor behind
// one gone. Once the trigger is dropped, the prune sent again with its
// request id removes the rest. Not parallel: it sets the package's batch
// size (two records a batch, seven records).
func TestPruneStopsHonestlyAtARecordATriggerKeeps(t *testing.T) {
	for _, c := range []struct {
		name, body string
		removed    int64
		want       []string
	}{
		{"a record of the first batch kept", "IF OLD.request_id = 'a1' THEN RETURN NULL; END IF; RETURN OLD;", 0,
			[]string{"DROP TRIGGER dba_hold ON leasestore_audit"}},
		{"a record of a later batch kept", "IF OLD.request_id = 'a3' THEN RETURN NULL; END IF; RETURN OLD;", 2,
			[]string{"DROP TRIGGER dba_hold ON leasestore_audit", "removed 2 records"}},
		{"a record of a later batch refused", "IF OLD.request_id = 'a3' THEN RAISE EXCEPTION 'on hold'; END IF; RETURN OLD;", 2,
			[]string{"on hold", "removed 2 records"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			dsn := pgtest.MigratedDSN(t)
			clock := contract.NewClock()
			b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
			postgres.SetPruneBatch(t, 2)
			acquireKeys(t, b, key, 7, time.Second)
			clock.Advance(time.Minute)
			owner := rawConn(t, dsn)
			ids := func() []int64 {
				rows, err := owner.Query(ctx, "SELECT id FROM leasestore_audit WHERE op <> 'prune' ORDER BY id")
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var out []int64
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						t.Fatal(err)
					}
					out = append(out, id)
				}
				return out
			}
			all := ids()
			mustExec(t, owner, `CREATE FUNCTION dba_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN `+c.body+` END $$`)
			mustExec(t, owner, `CREATE TRIGGER dba_hold BEFORE DELETE ON leasestore_audit FOR EACH ROW EXECUTE FUNCTION dba_hold()`)

			req := audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "p1"}
			res, err := b.PruneAudit(ctx, req)
			left := ids()
			if err == nil {
				t.Fatalf("prune beside a trigger that keeps a record: %+v, no error; %d of the 7 records before the cut-off "+
					"are still there", res, len(left))
			}
			if !errors.Is(err, protocol.ErrUnavailable) {
				t.Fatalf("prune beside a trigger that keeps a record: %v; want unavailable", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("prune beside a trigger that keeps a record: %v; want it to say %q", err, w)
				}
			}
			if res.Removed != c.removed || int64(len(left)) != 7-c.removed {
				t.Fatalf("the stopped prune says it removed %d records, and %d of 7 are left; want %d removed (its batches "+
					"before the kept record's, each whole)", res.Removed, len(left), c.removed)
			}
			var greatest int64
			if c.removed > 0 {
				greatest = all[c.removed-1]
			}
			for _, ns := range []string{"", "ns"} {
				mark := count(t, owner, "SELECT leasestore_audit_pruned_through($1)", ns)
				if int64(mark) != greatest || (len(left) > 0 && left[0] <= int64(mark)) {
					t.Fatalf("the mark of what prunes removed (namespace %q) is %d; want %d, the greatest id removed "+
						"(the oldest record left is %d)", ns, mark, greatest, left[0])
				}
			}
			// A prune "is itself recorded" (the shared DESIGN.md): each
			// committed batch (of 2) with a record of its own.
			if n := count(t, owner, "SELECT count(*) FROM leasestore_audit WHERE op = 'prune'"); int64(n) != c.removed/2 {
				t.Fatalf("the stopped prune left %d prune records; want %d, one for each batch that committed", n, c.removed/2)
			}
			if n := count(t, owner, "SELECT count(*) FROM leasestore_audit_prune_claim"); n != 0 {
				t.Fatalf("the stopped prune left %d claims", n)
			}

			mustExec(t, owner, "DROP TRIGGER dba_hold ON leasestore_audit")
			res, err = b.PruneAudit(ctx, req)
			if err != nil || res.Removed != 7-c.removed || res.Record.Reason != fmt.Sprintf("removed %d records before %s",
				7-c.removed, req.Before.UTC().Format(time.RFC3339Nano)) {
				t.Fatalf("the prune sent again after the trigger was dropped: %+v, %v; want the other %d records removed",
					res, err, 7-c.removed)
			}
		})
	}
}
