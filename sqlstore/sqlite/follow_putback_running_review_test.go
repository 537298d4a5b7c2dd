package sqlite_test

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestRunningFollowerAfterTheFileIsPutBack: a follower left running
// (`leasectl audit --follow`, `leasectl watch`, an export or a follow
// stream of `leasectl serve`) while a copy of the file is put back as
// docs/operator-guide.md says (written beside it, renamed over it, its old
// -wal and -shm removed; then `leasectl fencing raise`, which the guide
// allows while services run). Its Backend only reads, and reads never
// look at whether the path still names the files it opened (fileGuard:
// only writes and Health stat them), so it goes on reading the replaced
// file, which nothing writes any more: every record written to the store
// after the restore is skipped, silently, page after page, with no error.
// Found with leasectl: audit --follow and watch printed nothing for an
// acquire made after the restore, and exited 0 at Ctrl-C. DESIGN.md: a
// follower paging by cursor never skips a record; what a DBA does is made
// harmless or refused. A running writer's Backend refuses once it sees the
// replaced file (TestRunningBackendAfterTheFileIsPutBack); a follower's
// should too, or read the file at the path.
func TestRunningFollowerAfterTheFileIsPutBack(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	t.Parallel()
	path := migratedFile(t)
	w, err := sqlite.Open(ctxT(t), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cycleKey(t, w, "k", "w", "before", false)
	if err := w.Close(ctxT(t)); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	follower := open(t, path, nil) // audit --follow, started before the restore
	writer, err := sqlite.Open(ctxT(t), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cycleKey(t, writer, "k", "w", "after-copy", false)
	if err := writer.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	q := audit.Query{Namespace: key("k").Namespace, Follow: true}
	cursor, err := audit.Tail(ctxT(t), follower, q, nil) // it has read everything so far
	if err != nil {
		t.Fatal(err)
	}

	putBack(t, path, backup)
	restored := open(t, path, nil) // leasectl fencing raise, then the services of the restored store
	if _, err := restored.RaiseTokens(ctxT(t), protocol.MinTokenRaise); err != nil {
		t.Fatal(err)
	}
	cycleKey(t, restored, "new", "x", "restored", false)

	q.Cursor = cursor
	page, err := follower.ReadAudit(ctxT(t), q)
	if err != nil {
		if !errors.Is(err, sqlite.ErrFileReplaced) {
			t.Fatalf("the running follower's read after the restore: %v; want the new records, or a refusal matching sqlite.ErrFileReplaced", err)
		}
		return // refused, naming the fix: not silent
	}
	news := 0
	for _, rec := range page.Records {
		if rec.Key == "new" {
			news++
		}
	}
	if news != 2 {
		t.Fatalf("a follower left running through the restore, at cursor %s, read %d records (%d of the 2 written after the "+
			"file was put back and fencing raised), and no error: it reads the replaced file and skips them silently",
			cursor, len(page.Records), news)
	}
}
