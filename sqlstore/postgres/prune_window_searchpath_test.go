package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// The prune window's guard (schema 8) is SECURITY INVOKER with no pinned
// search_path, so it resolves has_table_privilege through the writing
// role's search_path. A serving role that may create objects in some
// schema (its own; public on PostgreSQL 14 and older) puts a
// has_table_privilege of its own ahead of pg_catalog and opens the window
// the guard is there to refuse it, then takes a prune's request id.
func TestServingRoleCannotOpenThePruneWindowThroughItsSearchPath(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	serving := pgtest.GrantedRoleDSN(t, dsn, grantTablesNoDe, grantSeqUsage)
	u, err := url.Parse(serving)
	if err != nil {
		t.Fatal(err)
	}
	role := u.User.Username()
	var schema string
	admin := rawConn(t, dsn)
	if err := admin.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	own := role + "_own"
	// A schema of the serving role's own (DROP OWNED BY, in the role's
	// cleanup, drops it too).
	mustExec(t, admin, "CREATE SCHEMA "+pgx.Identifier{own}.Sanitize()+" AUTHORIZATION "+pgx.Identifier{role}.Sanitize())
	t.Cleanup(func() {
		_ = dropSchema(pgx.Identifier{own}.Sanitize(), dsn)
	})

	conn := rawConn(t, serving)
	mustExec(t, conn, "CREATE FUNCTION "+pgx.Identifier{own, "has_table_privilege"}.Sanitize()+
		"(name, text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'")
	mustExec(t, conn, "SET search_path = "+pgx.Identifier{own}.Sanitize()+", pg_catalog, "+pgx.Identifier{schema}.Sanitize())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var pe *pgconn.PgError
	if _, err := tx.Exec(ctx, `INSERT INTO leasestore_audit_prune (id, before) VALUES (1, '-infinity')`); errors.As(err, &pe) && pe.Code == "42501" {
		return
	} else if err != nil {
		t.Fatalf("the serving role's write of the prune window: %v; want insufficient_privilege (42501)", err)
	}
	var holder *string
	if err := tx.QueryRow(ctx, `SELECT leasestore_audit_prune_claim('victim', 'mallory', 'mallory', now(), now())`).Scan(&holder); err != nil {
		t.Fatalf("the serving role's claim, its window open: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	owner := openBackend(t, dsn, nil)
	_, perr := owner.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "victim"})
	t.Fatalf("a serving role (SELECT, INSERT, UPDATE on the tables: may not prune) opened the prune window past its guard "+
		"with a has_table_privilege of its own ahead of pg_catalog in its search_path, and took the request id \"victim\" "+
		"(holder %s, committed); the owner's prune with that id then answered %v; want the window refused (42501)",
		deref(holder), perr)
}

// The prune window's guard is an ordinary trigger (ENABLE, origin), so it
// does not fire in a session whose session_replication_role is replica.
// A serving role allowed to set that parameter (GRANT SET ON PARAMETER,
// PostgreSQL 15: a replication or repair tool's role) opens the window
// the guard refuses it, and takes a prune's request id; the trail's own
// append-only triggers need no such care, as the role may not delete.
func TestServingRoleCannotOpenThePruneWindowAsAReplica(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	serving := pgtest.GrantedRoleDSN(t, dsn, grantTablesNoDe, grantSeqUsage)
	u, err := url.Parse(serving)
	if err != nil {
		t.Fatal(err)
	}
	// Revoked by DROP OWNED BY in the role's cleanup.
	mustExec(t, rawConn(t, dsn), "GRANT SET ON PARAMETER session_replication_role TO "+pgx.Identifier{u.User.Username()}.Sanitize())
	conn := rawConn(t, serving)
	mustExec(t, conn, "SET session_replication_role = replica")
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var pe *pgconn.PgError
	if _, err := tx.Exec(ctx, `INSERT INTO leasestore_audit_prune (id, before) VALUES (1, '-infinity')`); errors.As(err, &pe) && pe.Code == "42501" {
		return
	} else if err != nil {
		t.Fatalf("the serving role's write of the prune window: %v; want insufficient_privilege (42501)", err)
	}
	var holder *string
	if err := tx.QueryRow(ctx, `SELECT leasestore_audit_prune_claim('victim', 'mallory', 'mallory', now(), now())`).Scan(&holder); err != nil {
		t.Fatalf("the serving role's claim, its window open: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	owner := openBackend(t, dsn, nil)
	_, perr := owner.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "victim"})
	t.Fatalf("a serving role (SELECT, INSERT, UPDATE on the tables: may not prune) opened the prune window past its guard "+
		"with session_replication_role = replica, and took the request id \"victim\" (holder %s, committed); the owner's "+
		"prune with that id then answered %v; want the window refused (42501)", deref(holder), perr)
}

// dropSchema drops schema (an identifier, sanitized) from the database of dsn.
func dropSchema(schema, dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	return err
}
