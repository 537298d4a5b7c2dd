package sqlite_test

import (
	"context"
	"database/sql"
	"testing"

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
