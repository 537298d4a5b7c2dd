package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A prune removes records in batches, each its own transaction, so one
// that stops part way has removed the batches before it for good: it
// cannot be all or nothing, so it must say how far it got. On a schema
// newer than this release's (a rolling deploy migrated first), whose
// migrations' triggers this release does not know and so takes every
// trigger named leasestore_ for theirs (as the PostgreSQL backend does),
// a trigger so named on the trail that keeps some records (a BEFORE DELETE
// trigger that RAISE(IGNORE)s them: a hold on records of interest) made a batch
// remove fewer records than it took; the prune took that batch for its
// last, answered success and recorded "removed N records before T" while
// records before T were still there. One that refuses the delete
// (RAISE(ABORT)) stopped the prune with its message alone, which did not
// say that the earlier batches' records were gone, nor did the refusal of
// a trigger made between two batches at this release's schema. An AFTER
// DELETE trigger that RAISE(IGNORE)s skips the store's own, which marks
// what prunes removed (leasestore_audit_pruned): the last record removed
// went without its mark, and a follower behind it read on past it. Now a
// batch that could not delete every record it took, or mark each, removes
// none of them and stops the prune, naming the trigger and the DROP
// TRIGGER to run; a prune that stops after batches that committed says
// how many records they removed, as Removed does; and the mark is exactly
// the greatest id removed, in the trail and its namespace. Once the
// trigger is dropped, the prune sent again with its request id removes
// the rest. Not parallel: it sets the package's batch size (two records a
// batch, seven records). The PostgreSQL backend's is
// TestPruneStopsHonestlyAtARecordATriggerKeeps.
func TestPruneStopsHonestlyAtARecordATriggerKeeps(t *testing.T) {
	for _, c := range []struct {
		name    string
		newer   bool // the schema is one version newer than this release's
		between bool // the trigger is made after the prune's first batch
		trigger string
		removed int64
		want    []string
	}{
		{"a record of the first batch kept", true,
			false, "BEFORE DELETE ON leasestore_audit WHEN OLD.request_id = 'a0' BEGIN SELECT RAISE(IGNORE); END", 0,
			[]string{"dba_hold", "DROP TRIGGER dba_hold"}},
		{"a record of a later batch kept", true,
			false, "BEFORE DELETE ON leasestore_audit WHEN OLD.request_id = 'a3' BEGIN SELECT RAISE(IGNORE); END", 2,
			[]string{"DROP TRIGGER dba_hold", "removed 2 records"}},
		{"a record of a later batch refused", true,
			false, "BEFORE DELETE ON leasestore_audit WHEN OLD.request_id = 'a3' BEGIN SELECT RAISE(ABORT, 'on hold'); END", 2,
			[]string{"on hold", "DROP TRIGGER dba_hold", "removed 2 records"}},
		{"the last record removed without its mark", true,
			false, "AFTER DELETE ON leasestore_audit WHEN OLD.request_id = 'a6' BEGIN SELECT RAISE(IGNORE); END", 6,
			[]string{"leasestore_audit_pruned", "DROP TRIGGER dba_hold", "removed 6 records"}},
		{"a trigger made between batches at this release's schema", false,
			true, "BEFORE DELETE ON leasestore_audit WHEN OLD.request_id = 'a3' BEGIN SELECT RAISE(IGNORE); END", 2,
			[]string{"dba_hold", "DROP TRIGGER", "removed 2 records"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			path := migratedFile(t)
			owner := rawDB(t, path)
			clock := newClock()
			// On a newer schema a trigger of another name is refused before
			// any batch (storeRefusal): named as the newer schema's own, it
			// is met by the batch.
			name := "dba_hold"
			if c.newer {
				name = "leasestore_dba_hold"
			}
			hold := func() {
				if _, err := owner.ExecContext(ctx, "CREATE TRIGGER "+name+" "+c.trigger); err != nil {
					t.Error(err)
				}
			}
			between := func() {}
			if c.between {
				made := false
				between = func() {
					if !made {
						made = true
						hold()
					}
				}
			}
			b, err := sqlite.Open(ctx, path, sqlite.WithPruneBatchHook(sqlite.WithTestClock(nil, clock.Now), func() { between() }))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			sqlite.SetPruneBatch(t, 2)
			for i := range 7 {
				res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Second,
					RequestID: fmt.Sprint("a", i)})
				wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			}
			clock.Advance(time.Minute)
			ids := func() []int64 {
				rows, err := owner.QueryContext(ctx, "SELECT id FROM leasestore_audit WHERE op <> 'prune' ORDER BY id")
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
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return out
			}
			count := func(q string, args ...any) int64 {
				var n int64
				if err := owner.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				return n
			}
			all := ids()
			if c.newer {
				if _, err := owner.ExecContext(ctx, "INSERT INTO "+migrations.VersionTable+" (version_id, is_applied) VALUES (?, 1)",
					migrations.LatestVersion+1); err != nil {
					t.Fatal(err)
				}
			}
			if !c.between {
				hold()
			}

			req := audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "p1"}
			res, err := b.PruneAudit(ctx, req)
			left := ids()
			mark := func(ns string) int64 {
				return count("SELECT coalesce((SELECT through FROM leasestore_audit_pruned WHERE namespace = ?), 0)", ns)
			}
			if err == nil {
				t.Fatalf("prune beside a trigger that keeps a record: %+v, no error; %d of the 7 records before the cut-off "+
					"are still there, and the mark of what prunes removed is %d (the greatest id removed: %d)",
					res, len(left), mark("ns"), greatestGone(all, left))
			}
			want := slices.Clone(c.want)
			for i := range want {
				want[i] = strings.ReplaceAll(want[i], "dba_hold", name)
			}
			expectUnavailable(t, "prune beside a trigger that keeps a record", err, want...)
			if res.Removed != c.removed || int64(len(left)) != 7-c.removed {
				t.Fatalf("the stopped prune says it removed %d records, and %d of 7 are left; want %d removed (its batches "+
					"before the kept record's, each whole): %v", res.Removed, len(left), c.removed, err)
			}
			var greatest int64
			if c.removed > 0 {
				greatest = all[c.removed-1]
			}
			for _, ns := range []string{"", "ns"} {
				if m := mark(ns); m != greatest || (len(left) > 0 && left[0] <= m) {
					t.Fatalf("the mark of what prunes removed (namespace %q) is %d; want %d, the greatest id removed "+
						"(the oldest record left is %d)", ns, m, greatest, left[0])
				}
			}
			// A prune "is itself recorded" (the shared DESIGN.md): each
			// committed batch (of 2) with a record of its own.
			if n := count("SELECT count(*) FROM leasestore_audit WHERE op = 'prune'"); n != c.removed/2 {
				t.Fatalf("the stopped prune left %d prune records; want %d, one for each batch that committed", n, c.removed/2)
			}
			if n := count("SELECT count(*) FROM leasestore_audit_prune_claim"); n != 0 {
				t.Fatalf("the stopped prune left %d claims", n)
			}
			if c.removed == 0 && strings.Contains(err.Error(), "batches that committed") {
				t.Fatalf("a prune that removed nothing says its batches committed: %v", err)
			}

			if _, err := owner.ExecContext(ctx, "DROP TRIGGER "+name); err != nil {
				t.Fatal(err)
			}
			res, err = b.PruneAudit(ctx, req)
			if err != nil || res.Removed != 7-c.removed || res.Record.Reason != fmt.Sprintf("removed %d records before %s",
				7-c.removed, req.Before.UTC().Format(time.RFC3339Nano)) {
				t.Fatalf("the prune sent again after the trigger was dropped: %+v, %v; want the other %d records removed",
					res, err, 7-c.removed)
			}
			if n := len(ids()); n != 0 {
				t.Fatalf("after the prune sent again, %d records before its cut-off are left", n)
			}
		})
	}
}

// greatestGone is the greatest id of all that is not in left (0: none).
func greatestGone(all, left []int64) int64 {
	var g int64
	for _, id := range all {
		if !slices.Contains(left, id) {
			g = id
		}
	}
	return g
}
