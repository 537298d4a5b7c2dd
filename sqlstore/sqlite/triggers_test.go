package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestDroppedAuditTriggersAreRefused drops, from a second handle on the
// file (the sqlite3 shell of an operator, a script), each trigger that
// keeps the audit trail append-only or marks what a prune removed
// (migrations/sqlite 00001, 00002 and 00007). Without them the trail can
// be edited, emptied or replaced record by record, and a prune leaves no
// mark, so a follower behind it reads on past the removed records.
// DESIGN.md: the audit trail is append-only, enforced by the database; no
// setting or operation breaks a guarantee, each is made harmless or
// refused at open/health with an error naming the fix. The PostgreSQL
// backend refuses a dropped or disabled trigger at Open, New and Health,
// naming it (TestAuditTriggersThatDoNotFireAreRefused); the SQLite backend
// serves on and answers healthy.
func TestDroppedAuditTriggersAreRefused(t *testing.T) {
	t.Parallel()
	for _, trigger := range []string{
		"leasestore_audit_no_update",
		"leasestore_audit_no_delete",
		"leasestore_audit_no_replace",
		"leasestore_audit_pruned_through",
	} {
		t.Run(trigger, func(t *testing.T) {
			t.Parallel()
			path := migratedFile(t)
			b := open(t, path, nil)
			cycleKey(t, b, "k", "w", "before", false)

			other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.ExecContext(ctxT(t), "DROP TRIGGER "+trigger); err != nil {
				t.Fatal(err)
			}
			if err := other.Close(); err != nil {
				t.Fatal(err)
			}

			expectStatus(t, "health of the running backend", b.Health(ctxT(t)), protocol.StatusUnavailable, trigger)
			again, err := sqlite.Open(ctxT(t), path, nil)
			if err == nil {
				_ = again.Close(context.Background())
			}
			expectStatus(t, "open", err, protocol.StatusUnavailable, trigger)
		})
	}
}

// TestPruneWithoutItsMarkTriggerLeavesNoSilentGap drops, from a second
// handle on the file, the trigger that records what a prune removed
// (leasestore_audit_pruned_through, migration 7), then prunes through the
// running Backend records a follower has not read. The prune removes them
// and leaves no mark, and the follower reads on past them with no error.
// DESIGN.md: a follower paging by cursor never skips a record. The
// PostgreSQL backend refuses such a prune, naming the fix, and removes
// nothing (TestPruneRefusesWhileItsMarkIsNotKept); here either the prune
// is refused or the follower's read must fail with audit.ErrPruned.
func TestPruneWithoutItsMarkTriggerLeavesNoSilentGap(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	clock := newClock()
	path := migratedFile(t)
	b := open(t, path, clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	q := audit.Query{Namespace: "ns", Follow: true}
	page, err := b.ReadAudit(ctx, q)
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	q.Cursor = audit.EncodeCursor(page.Records[0].ID) // the follower has read the acquire
	for i := range 3 {
		clock.Advance(time.Second)
		r, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: time.Hour,
			RequestID: fmt.Sprintf("r%d", i)})
		wantStatus(t, "renew", r, err, protocol.StatusRenewed)
	}
	clock.Advance(time.Minute)
	later, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("later"), Owner: "w", TTL: time.Hour, RequestID: "l"})
	wantStatus(t, "acquire later", later, err, protocol.StatusAcquired)

	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, "DROP TRIGGER leasestore_audit_pruned_through"); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}

	pr, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil {
		if pr.Removed != 0 {
			t.Fatalf("the refused prune removed %d records: %v", pr.Removed, err)
		}
		return // refused, nothing removed: no gap
	}
	next, err := b.ReadAudit(ctx, q)
	if err == nil {
		t.Fatalf("follower at %s after a prune that removed %d records (3 renews after its cursor) with "+
			"leasestore_audit_pruned_through dropped: page of %d records, no error: it skipped the renews silently",
			q.Cursor, pr.Removed, len(next.Records))
	}
	wantPruned(t, "follower of ns at "+q.Cursor, next, err)
}

// TestCommittedPruneWindowIsRefused commits, from a second handle on the
// file, a row of leasestore_audit_prune: the prune window, which a prune
// opens and closes inside each of its transactions, so that no committed
// state ever holds it. Left committed (a script, an operator's sqlite3
// shell, a copy of a prune's statements run without its close), it lets
// any plain DELETE of the records older than its cut-off through the
// append-only trigger, and the running Backend answers healthy. DESIGN.md:
// the only way records leave is `leasectl audit prune`; no operation
// breaks a guarantee, each is made harmless or refused at open/health with
// an error naming the fix. Once the row is gone, the store is healthy again.
func TestCommittedPruneWindowIsRefused(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	cycleKey(t, b, "k", "w", "before", false)

	other := rawDB(t, path)
	if _, err := other.ExecContext(ctxT(t), "INSERT INTO leasestore_audit_prune (id, before) VALUES (1, 9000000000000000000)"); err != nil {
		t.Fatal(err)
	}
	// The hazard: a plain DELETE of the whole trail now goes through (rolled back here).
	tx, err := other.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := tx.ExecContext(ctxT(t), "DELETE FROM leasestore_audit")
	if err != nil {
		t.Fatalf("a plain DELETE with the window committed: %v; want it through (else the window is harmless)", err)
	}
	if n, _ := gone.RowsAffected(); n == 0 {
		t.Fatalf("a plain DELETE with the window committed removed nothing")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	expectStatus(t, "health of the running backend", b.Health(ctxT(t)), protocol.StatusUnavailable, "leasestore_audit_prune")
	again, err := sqlite.Open(ctxT(t), path, nil)
	if err == nil {
		_ = again.Close(context.Background())
	}
	expectStatus(t, "open", err, protocol.StatusUnavailable, "leasestore_audit_prune")

	// A prune meanwhile removes nothing and leaves the row for the
	// operator to see, as on PostgreSQL: it took the row over, removed the
	// records before its own cut-off and deleted the row with its window.
	pr, err := b.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"})
	expectStatus(t, "prune with the window committed", err, protocol.StatusUnavailable, "leasestore_audit_prune")
	var rows, records int
	if err := other.QueryRowContext(ctxT(t), "SELECT (SELECT count(*) FROM leasestore_audit_prune), (SELECT count(*) FROM leasestore_audit)").
		Scan(&rows, &records); err != nil {
		t.Fatal(err)
	}
	if pr.Removed != 0 || rows != 1 || records == 0 {
		t.Fatalf("prune with the window committed: removed %d, the window's rows %d, records left %d; want nothing removed and the row left",
			pr.Removed, rows, records)
	}

	if _, err := other.ExecContext(ctxT(t), "DELETE FROM leasestore_audit_prune"); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health once the window's row is gone: %v", err)
	}
}

// TestAlteredTriggerIsRefusedUntilMadeAsItsMigration rewrites, from a
// second handle on the file, the trigger that keeps the fencing counter
// from going back (migration 1) so that it never fires: the counter can
// then be set back and tokens issued again, while the running Backend
// answers healthy. It must be refused like a dropped one, naming the
// trigger and its migration; a schema newer than this release's, whose
// migrations may rewrite a trigger, is judged by the triggers' names only;
// once the trigger is made again as its migration makes it, the store is
// healthy and opens.
func TestAlteredTriggerIsRefusedUntilMadeAsItsMigration(t *testing.T) {
	t.Parallel()
	const name = "leasestore_fencing_no_decrease"
	path := migratedFile(t)
	b := open(t, path, nil)
	cycleKey(t, b, "k", "w", "before", false)
	other := rawDB(t, path)
	for _, q := range []string{
		"DROP TRIGGER " + name,
		"CREATE TRIGGER " + name + " BEFORE UPDATE ON leasestore_fencing WHEN 0 BEGIN SELECT 1; END",
	} {
		if _, err := other.ExecContext(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.ExecContext(ctxT(t), "UPDATE leasestore_fencing SET last_token = 0"); err != nil {
		t.Fatalf("the altered trigger still refuses the counter going back: %v", err)
	}
	expectStatus(t, "health", b.Health(ctxT(t)), protocol.StatusUnavailable, name, "migrations/sqlite/00001_leasestore.sql")
	again, err := sqlite.Open(ctxT(t), path, nil)
	if err == nil {
		_ = again.Close(context.Background())
	}
	expectStatus(t, "open", err, protocol.StatusUnavailable, name)

	newer := fmt.Sprintf("INSERT INTO leasestore_goose_db_version (version_id, is_applied) VALUES (%d, 1)", migrations.LatestVersion+1)
	if _, err := other.ExecContext(ctxT(t), newer); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health of a newer schema (which may rewrite a trigger): %v", err)
	}
	if _, err := other.ExecContext(ctxT(t), "DELETE FROM leasestore_goose_db_version WHERE version_id = ?", migrations.LatestVersion+1); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "health back at this release's schema", b.Health(ctxT(t)), protocol.StatusUnavailable, name)

	text := migrationText(t, "00001_leasestore.sql", "CREATE TRIGGER "+name)
	if _, err := other.ExecContext(ctxT(t), "DROP TRIGGER "+name+"; "+text); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health once the trigger is made again as its migration makes it: %v", err)
	}
	open(t, path, nil)
}

// migrationText returns the statement of the SQLite migration file that
// begins with prefix, through its "END;".
func migrationText(t *testing.T, file, prefix string) string {
	t.Helper()
	fsys, err := migrations.FS(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, prefix+" ")
	if i < 0 {
		t.Fatalf("%s holds no %q", file, prefix)
	}
	j := strings.Index(s[i:], "END;")
	if j < 0 {
		t.Fatalf("%s: %q has no END;", file, prefix)
	}
	return s[i : i+j+len("END;")]
}

// TestForeignTriggersOnTheStoreAreRefused adds, from a second handle on
// the file, a trigger of the operator's own on the audit trail that
// drops its inserts (RAISE(IGNORE) skips the row and the statement goes
// on: a change meeting it fails, see batch_record_test.go). A trigger on
// the store's tables that its migrations did not make is refused at
// Health and Open, naming it, as a dropped or altered one is (the
// PostgreSQL backend refuses the same).
func TestForeignTriggersOnTheStoreAreRefused(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	other := otherHandle(t, path)
	if _, err := other.ExecContext(ctxT(t), `CREATE TRIGGER archive_elsewhere BEFORE INSERT ON leasestore_audit
BEGIN SELECT RAISE(IGNORE); END`); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "health of the running backend", b.Health(ctxT(t)), protocol.StatusUnavailable, "archive_elsewhere")
	again, err := sqlite.Open(ctxT(t), path, nil)
	if err == nil {
		_ = again.Close(context.Background())
	}
	expectStatus(t, "open", err, protocol.StatusUnavailable, "archive_elsewhere")
	if _, err := other.ExecContext(ctxT(t), `DROP TRIGGER archive_elsewhere`); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctxT(t)); err != nil {
		t.Errorf("health once the foreign trigger was dropped: %v", err)
	}
}
