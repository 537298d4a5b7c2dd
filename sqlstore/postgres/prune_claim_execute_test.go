package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// pruneClaimFunctions are the prune's SECURITY DEFINER functions of
// migration 8, by signature.
var pruneClaimFunctions = []string{
	"leasestore_audit_prune_claim(text, text, text, timestamptz, timestamptz)",
	"leasestore_audit_prune_unclaim(text, text)",
}

// Migration 8's leasestore_audit_prune_claim() and
// leasestore_audit_prune_unclaim() run as the schema's owner (SECURITY
// DEFINER) and write leasestore_audit_prune_claim, and PostgreSQL lets
// PUBLIC execute a new function: any role that could reach the schema
// could call them, kept out only by their check of the prune window. With
// a row of the window committed (a DBA's by hand, which Health refuses
// but nothing prevents), a role that may only read took a prune's request
// id, so that the prune with that id was refused as used, and freed the
// claim of a prune in progress, so that its next batch failed. Only the
// roles that may prune may execute them: a role that reads, or serves,
// is refused by the server (permission denied for the function) whatever
// the window's state, and changes nothing.
func TestUnprivilegedRolesCannotCallThePruneClaimFunctions(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	owner := rawConn(t, dsn)
	roles := map[string]string{
		"a role that reads":  pgtest.GrantedRoleDSN(t, dsn, "SELECT ON ALL TABLES IN SCHEMA %s"),
		"a role that serves": pgtest.GrantedRoleDSN(t, dsn, grantTablesNoDe, grantSeqUsage),
	}
	mustExec(t, owner, `INSERT INTO leasestore_audit_prune_claim (request_id, run, actor, before, at)
    VALUES ('busy', 'run-1', 'ops', now(), now())`)
	for _, window := range []string{"no prune window", "a committed prune window"} {
		if window == "a committed prune window" {
			mustExec(t, owner, "INSERT INTO leasestore_audit_prune (id, before) VALUES (1, now())")
		}
		for who, roleDSN := range roles {
			conn := rawConn(t, roleDSN)
			for _, f := range pruneClaimFunctions {
				var may bool
				if err := conn.QueryRow(ctxT(t), "SELECT has_function_privilege($1, 'EXECUTE')", f).Scan(&may); err != nil {
					t.Fatal(err)
				}
				if may {
					t.Errorf("%s may execute %s", who, f)
				}
			}
			for _, call := range []string{
				`SELECT leasestore_audit_prune_claim('victim', 'mallory', 'mallory', now(), now())`,
				`SELECT leasestore_audit_prune_unclaim('busy', 'run-1')`,
			} {
				var pe *pgconn.PgError
				_, err := conn.Exec(ctxT(t), call)
				if !errors.As(err, &pe) || pe.Code != "42501" || !strings.HasPrefix(pe.Message, "permission denied for function") {
					t.Errorf("%s, with %s: %s: %v; want permission denied for the function", who, window, call, err)
				}
			}
		}
	}
	var claims []string
	rows, err := owner.Query(ctxT(t), "SELECT request_id || '/' || run FROM leasestore_audit_prune_claim ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	if claims, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0] != "busy/run-1" {
		t.Fatalf("the claims after the calls are %q; want only the owner's busy/run-1", claims)
	}
}

// A role that could prune before migration 8 (granted DELETE on the
// trail, with the rest of the schema's tables, before the claim's table
// and functions existed) prunes after it without a grant of its own,
// as docs/postgres-settings.md says; a role granted only reads then may
// not execute the claim's functions.
func TestRoleThatPrunedBeforeMigration8PrunesAfterIt(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	db := sqlDB(t, dsn)
	for v := migrations.LatestVersion; v > 7; v-- {
		if _, err := migrations.Down(ctx, migrations.Postgres, db); err != nil {
			t.Fatalf("down from %d to 7: %v", v, err)
		}
	}
	pruning := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage)
	reading := pgtest.GrantedRoleDSN(t, dsn, "SELECT ON ALL TABLES IN SCHEMA %s")
	if _, err := migrations.Up(ctx, migrations.Postgres, db); err != nil {
		t.Fatalf("up from 7: %v", err)
	}
	b := openBackend(t, pruning, nil)
	acquireLapsed(t, b, key, 3)
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "p1"})
	if err != nil || res.Removed != 3 {
		t.Fatalf("prune by a role granted the tables before migration 8: %+v, %v; want the 3 records removed", res, err)
	}
	conn := rawConn(t, reading)
	for _, f := range pruneClaimFunctions {
		var may bool
		if err := conn.QueryRow(ctx, "SELECT has_function_privilege($1, 'EXECUTE')", f).Scan(&may); err != nil {
			t.Fatal(err)
		}
		if may {
			t.Errorf("a role granted reads before migration 8 may execute %s after it", f)
		}
	}
}
