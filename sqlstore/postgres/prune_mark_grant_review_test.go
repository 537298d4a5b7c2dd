package postgres_test

import (
	"net/url"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// Migration 11's leasestore_audit_pruned_mark (SECURITY DEFINER: it reads
// leasestore_audit_pruned as its owner) is to be executable by whoever may
// execute leasestore_audit_pruned_through (the migration's comment: "the
// grants are copied"). Where a DBA revoked PUBLIC's EXECUTE on
// leasestore_audit_pruned_through and granted it to the application's role
// alone, the grants are copied to the new function, but PUBLIC keeps the
// EXECUTE PostgreSQL gives a new function: any role that may use the
// schema reads, as the owner, how far and how often prunes removed each
// namespace's records, which it may not read through
// leasestore_audit_pruned_through.
func TestPrunedMarkIsNoMoreExecutableThanPrunedThrough(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ownerDSN := pgtest.RoleDSN(t, dsn)
	ctx := ctxT(t)
	owner := rawConn(t, ownerDSN)
	p, err := migrations.NewProvider(ctx, migrations.Postgres, sqlDB(t, ownerDSN))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 10); err != nil {
		t.Fatal(err)
	}
	appDSN := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage)
	u, err := url.Parse(appDSN)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, owner, "REVOKE EXECUTE ON FUNCTION leasestore_audit_pruned_through(text) FROM PUBLIC")
	mustExec(t, owner, "GRANT EXECUTE ON FUNCTION leasestore_audit_pruned_through(text) TO "+u.User.Username())
	if _, err := p.Up(ctx); err != nil { // version 11, which makes leasestore_audit_pruned_mark
		t.Fatal(err)
	}
	other, err := url.Parse(pgtest.GrantedRoleDSN(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	may := func(role, fn string) bool {
		var ok bool
		if err := owner.QueryRow(ctx, `SELECT has_function_privilege($1, $2, 'EXECUTE')`, role, fn).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !may(u.User.Username(), "leasestore_audit_pruned_mark(text)") {
		t.Fatal("the role that may execute leasestore_audit_pruned_through may not execute leasestore_audit_pruned_mark")
	}
	if may(other.User.Username(), "leasestore_audit_pruned_through(text)") {
		t.Fatal("setup: the other role may execute leasestore_audit_pruned_through")
	}
	if may(other.User.Username(), "leasestore_audit_pruned_mark(text)") {
		t.Fatal("a role that may not execute leasestore_audit_pruned_through may execute leasestore_audit_pruned_mark (PUBLIC kept its EXECUTE)")
	}
}
