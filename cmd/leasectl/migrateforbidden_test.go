package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// TestMigrateRefusedForPrivilegesExits7: `leasectl migrate` as a
// PostgreSQL role the server refuses a privilege the migrations need
// (SQLSTATE 42501) exits 7, status forbidden, as every other command
// refused for the DSN's role's privileges does (DESIGN.md's exit 7; not 1,
// a failure to investigate, nor 5, an outage to retry), naming the fix:
// up as a role without CREATE on the schema names the GRANT CREATE and the
// schema's owner, and creates nothing; down as a role that does not own
// the store's objects names their owner; status as a role that may not
// read the version table names the owner too. The scratch schemas and
// roles are pgtest's, dropped in t.Cleanup whatever the outcome. migrate
// up exited 1, saying only "permission denied for schema".
func TestMigrateRefusedForPrivilegesExits7(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// up: USAGE on the schema and nothing else.
	dsn := pgtest.DSN(t)
	c := leasectl{dir: t.TempDir(), dsn: pgtest.GrantedRoleDSN(t, dsn)}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	for _, output := range []string{"table", "json"} {
		r := c.run(t, "migrate", "up", "-o", output)
		said := r.stderr
		if output == "json" && r.stdout != "" {
			m := r.obj(t)
			said, _ = m["message"].(string)
			if m["status"] != "forbidden" {
				t.Errorf("migrate up -o json as a role without CREATE: status %v, want forbidden\n%s", m["status"], r)
			}
		}
		if r.code != 7 || !strings.Contains(said, "forbidden") || !strings.Contains(said, `GRANT CREATE ON SCHEMA "`+schema+`"`) ||
			!strings.Contains(said, "owner") {
			t.Errorf("migrate up (-o %s) as a role without CREATE on schema %s: want exit 7, forbidden, naming GRANT CREATE ON "+
				"SCHEMA %q and the schema's owner\n%s", output, schema, schema, r)
		}
	}
	var objects int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace)
		+ (SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace)`, schema).Scan(&objects); err != nil {
		t.Fatal(err)
	}
	if objects != 0 {
		t.Errorf("a refused migrate up left %d objects in schema %s", objects, schema)
	}

	// down: every privilege on the tables of a store another role
	// migrated (and owns). The newest migrations may change nothing (10
	// records its version only), so down goes on until one is refused.
	migrated := pgtest.MigratedDSN(t)
	d := leasectl{dir: t.TempDir(), dsn: pgtest.GrantedRoleDSN(t, migrated,
		"ALL ON ALL TABLES IN SCHEMA %s", "ALL ON ALL SEQUENCES IN SCHEMA %s")}
	var r run
	for i := 0; i < 20; i++ {
		if r = d.run(t, "migrate", "down"); r.code != 0 {
			break
		}
	}
	if r.code != 7 || !strings.Contains(r.stderr, "forbidden") || !strings.Contains(r.stderr, "owner") {
		t.Errorf("migrate down as a role that does not own the store's objects: want exit 7, forbidden, naming the owner\n%s", r)
	}

	// status: USAGE on a migrated schema, no SELECT on its tables.
	s := leasectl{dir: t.TempDir(), dsn: pgtest.GrantedRoleDSN(t, pgtest.MigratedDSN(t))}
	if r := s.run(t, "migrate", "status"); r.code != 7 || !strings.Contains(r.stderr, "forbidden") ||
		!strings.Contains(r.stderr, "leasestore_goose_db_version") {
		t.Errorf("migrate status as a role that may not read the version table: want exit 7, forbidden, naming the table\n%s", r)
	}
}

// TestMigrateUpWithoutUsageExits7: migrate up as a role that may not use
// the schema its search_path names (no USAGE) is refused for the role's
// privileges too: exit 7, status forbidden, naming the GRANT of USAGE, as
// Open and Health do (DESIGN.md's exit 7: "no USAGE on the schema"), and
// nothing is created. It exited 1.
func TestMigrateUpWithoutUsageExits7(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := pgtest.DSN(t)
	roleDSN := pgtest.GrantedRoleDSN(t, dsn)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	role, err := pgx.ParseConfig(roleDSN)
	if err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := admin.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "REVOKE USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" FROM "+
		pgx.Identifier{role.User}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	c := leasectl{dir: t.TempDir(), dsn: roleDSN}
	r := c.run(t, "migrate", "up", "-o", "json")
	if r.code != 7 {
		t.Fatalf("migrate up as a role without USAGE on schema %s: exit %d, want 7\n%s", schema, r.code, r)
	}
	if m := r.obj(t); m["status"] != "forbidden" || !strings.Contains(m["message"].(string), `GRANT USAGE ON SCHEMA "`+schema+`"`) {
		t.Errorf("migrate up as a role without USAGE on schema %s: %v, want status forbidden naming the GRANT of USAGE", schema, m)
	}
	var objects int
	if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace)
		+ (SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace)`, schema).Scan(&objects); err != nil {
		t.Fatal(err)
	}
	if objects != 0 {
		t.Errorf("a refused migrate up left %d objects in schema %s", objects, schema)
	}
}

// TestMigrateUpOfAMissingSchemaNamesItsCreation: migrate up into a schema
// that does not exist yet, as a role that may not create schemas (no
// CREATE on the database), is refused for the role's privileges (exit 7)
// naming the fix that applies: have the schema created (the CREATE SCHEMA
// to run, making the role its owner), or GRANT CREATE ON DATABASE. There
// is no schema whose owner
// could run it: the message said first "run leasectl migrate as the
// schema's owner".
func TestMigrateUpOfAMissingSchemaNamesItsCreation(t *testing.T) {
	t.Parallel()
	missing, schema := pgtest.MissingSchemaDSN(t)
	role, err := pgx.ParseConfig(pgtest.GrantedRoleDSN(t, pgtest.DSN(t)))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(missing)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role.User)
	c := leasectl{dir: t.TempDir(), dsn: u.String()}
	r := c.run(t, "migrate", "up", "-o", "json")
	if r.code != 7 {
		t.Fatalf("migrate up into missing schema %s as a role without CREATE on the database: exit %d, want 7\n%s", schema, r.code, r)
	}
	m := r.obj(t)
	said, _ := m["message"].(string)
	if m["status"] != "forbidden" || !strings.Contains(said, `CREATE SCHEMA IF NOT EXISTS "`+schema+`" AUTHORIZATION "`+role.User+`"`) ||
		!strings.Contains(said, "GRANT CREATE ON DATABASE") || strings.Contains(said, "schema's owner") {
		t.Errorf("migrate up into missing schema %s: %v\nwant status forbidden naming the CREATE SCHEMA and GRANT CREATE ON DATABASE, "+
			"not the owner of a schema that does not exist", schema, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("a refused migrate up created schema %s", schema)
	}
}
