package postgres_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// TestMigrateOfARoleWithoutUsageIsToldTheGrant: Open and Health tell a
// role that may not use the store's schema the GRANT that gives it USAGE,
// with the schema's name quoted
// (TestTheSchemaGrantRunsAsGivenForASchemaThatNeedsQuotes). `leasectl
// migrate up` (migrations.Up) as such a role must tell the same: the
// schema exists, the role may not use it. It says instead that the schema
// "does not exist and this user cannot create it", and has the DBA run
// CREATE SCHEMA IF NOT EXISTS, which does nothing (the schema is there)
// and leaves the role as it was: the server passes over a schema of the
// search_path the role may not use, so current_schema() is NULL, which
// migrations.EnsureSchema takes for a missing schema.
func TestMigrateOfARoleWithoutUsageIsToldTheGrant(t *testing.T) {
	t.Parallel()
	dsn, schema := quotedSchemaDSN(t)
	if err := pgtest.Migrate(ctxT(t), dsn); err != nil {
		t.Fatalf("migrate into schema %q: %v", schema, err)
	}
	roleDSN := pgtest.RoleDSN(t, dsn) // may migrate: USAGE and CREATE on the schema, all on its tables
	role := roleName(t, roleDSN)
	quoted := pgx.Identifier{schema}.Sanitize()
	mustExec(t, rawConn(t, pgtest.ServerDSN(t)), "REVOKE USAGE ON SCHEMA "+quoted+" FROM "+role)

	cfg, err := pgx.ParseConfig(roleDSN)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	_, err = migrations.Up(ctxT(t), migrations.Postgres, db)
	if err == nil {
		t.Fatalf("migrate up as a role without USAGE on schema %q: no error", schema)
	}
	if msg := err.Error(); strings.Contains(msg, "does not exist") || !strings.Contains(msg, "GRANT USAGE") ||
		!strings.Contains(msg, " ON SCHEMA "+quoted) {
		t.Errorf("migrate up as a role without USAGE on schema %q, which exists: %v; want it to name the GRANT of USAGE ON SCHEMA %s "+
			"(as Open and Health do), not to call the schema missing", schema, err, quoted)
	}
}
