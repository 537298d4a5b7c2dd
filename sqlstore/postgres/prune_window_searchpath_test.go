package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	tryToTakeAPruneRequestID(t, conn, dsn, "opened the prune window past its guard with a has_table_privilege of its own ahead of pg_catalog in its search_path,")
}

// The prune window's guard is an ordinary trigger (ENABLE, origin), so it
// does not fire in a session whose session_replication_role is replica.
// A serving role allowed to set that parameter (GRANT SET ON PARAMETER,
// PostgreSQL 15: a replication or repair tool's role) opens the window
// the guard refuses it, and takes a prune's request id; the trail's own
// append-only triggers need no such care, as the role may not delete.
func TestServingRoleCannotOpenThePruneWindowAsAReplica(t *testing.T) {
	t.Parallel()
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
	tryToTakeAPruneRequestID(t, conn, dsn, "opened the prune window past its guard with session_replication_role = replica,")
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
