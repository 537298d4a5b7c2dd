package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A role that may not use the store's schema is told the GRANT that gives
// it USAGE (TestRoleWithoutUsageOnTheSchemaIsToldTheGrant). Its statement
// named the schema as written, unquoted: for a schema whose name needs
// quotes (upper case, a dash, a space, a double quote) the statement
// failed, or granted on another schema, when the DBA ran it as given.
// Here the store lives in such a schema: Open's and Health's GRANT, run
// as given (as a superuser, for the role), gives the role USAGE on it.
func TestTheSchemaGrantRunsAsGivenForASchemaThatNeedsQuotes(t *testing.T) {
	t.Parallel()
	dsn, schema := quotedSchemaDSN(t)
	if err := pgtest.Migrate(ctxT(t), dsn); err != nil {
		t.Fatalf("migrate into schema %q: %v", schema, err)
	}
	roleDSN := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage)
	role := roleName(t, roleDSN)
	b := openBackend(t, roleDSN, nil)
	admin := rawConn(t, pgtest.ServerDSN(t))
	mustExec(t, admin, "REVOKE USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" FROM "+role)

	for _, c := range []struct {
		what string
		err  func() error
	}{
		{"health", func() error { return b.Health(ctxT(t)) }},
		{"open", func() error {
			b, err := postgres.Open(ctxT(t), roleDSN, nil)
			if err == nil {
				_ = b.Close(context.Background())
			}
			return err
		}},
	} {
		err := c.err()
		if !errors.Is(err, protocol.ErrUnavailable) {
			t.Fatalf("%s of a role without USAGE on schema %q: %v; want unavailable naming the GRANT", c.what, schema, err)
		}
		_, rest, ok := strings.Cut(err.Error(), "run GRANT ")
		grant, _, ok2 := strings.Cut(rest, " TO it")
		if !ok || !ok2 || !strings.Contains(grant, "ON SCHEMA") {
			t.Fatalf("%s of a role without USAGE on schema %q: %v; want it to name GRANT ... ON SCHEMA ... TO it", c.what, schema, err)
		}
		stmt := "GRANT " + grant + " TO " + role
		if _, err := admin.Exec(ctxT(t), stmt); err != nil {
			t.Fatalf("%s's hint for schema %q, run as given (%s): %v", c.what, schema, stmt, err)
		}
		var usage bool
		if err := admin.QueryRow(ctxT(t), "SELECT has_schema_privilege($1, $2, 'USAGE')",
			strings.Trim(role, `"`), schema).Scan(&usage); err != nil {
			t.Fatal(err)
		}
		if !usage {
			t.Fatalf("%s's hint for schema %q, run as given (%s), did not give the role USAGE on it", c.what, schema, stmt)
		}
		mustExec(t, admin, "REVOKE USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" FROM "+role)
	}
	mustExec(t, admin, "GRANT USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+role)
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health once the role may use schema %q: %v", schema, err)
	}
}

// quotedSchemaDSN creates a schema whose name needs quoting in SQL (upper
// case, a dash, spaces, a double quote) and returns a DSN whose
// connections use it as search_path (a startup parameter, which pgx sends
// for a DSN parameter it does not know), and the schema's name. The
// schema is dropped in t.Cleanup.
func quotedSchemaDSN(t *testing.T) (dsn, schema string) {
	t.Helper()
	server := pgtest.ServerDSN(t)
	schema = `Ls-Test "q" ` + strings.TrimPrefix(pgtest.Namespace(), "t-")
	quoted := pgx.Identifier{schema}.Sanitize()
	mustExec(t, rawConn(t, server), "CREATE SCHEMA "+quoted)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("drop schema %q: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+quoted+" CASCADE"); err != nil {
			t.Errorf("drop schema %q: %v", schema, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", quoted)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String(), schema
}
