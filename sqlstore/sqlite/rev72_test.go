package sqlite_test

import (
	"context"
	"os"
	"testing"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// rev72: a copy of the file put back (docs/operator-guide.md "After a
// restore to an earlier point", followed to the letter: fencing raise)
// hands out again the audit ids of the records written after the copy. A
// follower that had read them (audit --follow, watch, a follow stream, an
// export resumed from its cursor) then skips every new record until the
// ids pass its cursor, silently: DESIGN.md, "a follower paging by cursor
// (Follow) never skips a record". PostgreSQL starts a new era of ids when
// its ids go back; the SQLite file does nothing of the kind, and fencing
// raise moves only the token counter.
func TestFollowerAfterTheFileIsPutBack(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cycleKey(t, b, "k", "w", "before", false)
	if err := b.Close(context.Background()); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = open(t, path, nil)
	for _, rid := range []string{"after-0", "after-1", "after-2"} {
		cycleKey(t, b, "k", "w", rid, false)
	}
	q := audit.Query{Namespace: key("k").Namespace, Follow: true}
	cursor, err := audit.Tail(ctxT(t), b, q, nil) // a follower that read everything so far
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, backup, 0o644); err != nil {
		t.Fatal(err)
	}
	r := open(t, path, nil)
	if _, err := r.RaiseTokens(ctxT(t), protocol.MinTokenRaise); err != nil {
		t.Fatal(err)
	}
	cycleKey(t, r, "new", "x", "restored", false) // an acquire and a release after the restore
	q.Cursor = cursor
	page, err := r.ReadAudit(ctxT(t), q)
	if err != nil {
		t.Logf("the follower's read after the restore failed: %v (loud: fine)", err)
		return
	}
	var news int
	for _, rec := range page.Records {
		if rec.Key == "new" {
			news++
		}
	}
	if news != 2 {
		all, _ := r.ReadAudit(ctxT(t), audit.Query{Namespace: q.Namespace})
		var ids []int64
		for _, rec := range all.Records {
			ids = append(ids, rec.ID)
		}
		t.Fatalf("a follower at cursor %s read %d of the 2 records written after the file was put back and fencing raised "+
			"(trail ids now %v): it skipped them silently", cursor, news, ids)
	}
}
