package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// DESIGN.md: the trail is append-only, enforced by the database; records
// leave only through a prune, older than its cut-off, and the prune is
// recorded. The trail's trigger (leasestore_audit_refuse, schema 2) lets a
// DELETE through when the record is older than the prune window's before,
// and finds the window by an unqualified name through the deleting role's
// search_path, where pg_temp comes first: a role granted DELETE (the
// common grant set: SELECT, INSERT, UPDATE, DELETE ON ALL TABLES) makes a
// temporary leasestore_audit_prune with a window of its own and deletes
// any record, a fresh one too, with no prune and no record of it. This
// predates the commits under review (helper-114 found it while attacking
// schema 8's window guard).
func TestAppendOnlyTrailRefusesADeleteThroughATemporaryWindow(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"}); err != nil {
		t.Fatal(err)
	}
	app := rawConn(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage))
	mustExec(t, app, `CREATE TEMP TABLE leasestore_audit_prune (id integer, before timestamptz)`)
	mustExec(t, app, `INSERT INTO pg_temp.leasestore_audit_prune VALUES (1, 'infinity')`)
	tag, err := app.Exec(ctx, `DELETE FROM leasestore_audit WHERE request_id = 'a'`)
	if err == nil && tag.RowsAffected() > 0 {
		t.Fatalf("a role granted DELETE deleted the acquire's fresh audit record (%s) outside any prune, its "+
			"window a temporary table of its own that the trail's trigger found first; want the delete refused "+
			"(append-only)", tag)
	}
}
