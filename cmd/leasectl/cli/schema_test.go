package cli

import (
	"context"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// The operator guide's advice, followed literally: migrate up with a search_path
// naming a schema that does not exist yet creates the schema (the
// operator's own) and migrates into it; the store then works. Before it,
// a command says what fixes it: migrate up, which creates the schema
// itself (it said "create it, then run `leasectl migrate up`", a step
// migrate up takes anyway).
func TestMigrateUpCreatesTheSearchPathSchema(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.MissingSchemaDSN(t)
	e := env{EnvDSN: dsn}
	get := runCLI(t, e, "get", "k")
	wantCode(t, get, ExitUnavailable)
	if !strings.Contains(get.stderr, "run `leasectl migrate up`, which creates it") || strings.Contains(get.stderr, "create it, then") {
		t.Errorf("get on a missing schema:\n%s", get.stderr)
	}
	up := runCLI(t, e, "migrate", "up")
	wantCode(t, up, ExitOK)
	if !strings.Contains(up.stderr, "created schema") || !strings.Contains(up.stderr, schema) {
		t.Errorf("migrate up should say it created schema %s; stderr:\n%s", schema, up.stderr)
	}
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), ExitOK)
	again := runCLI(t, e, "migrate", "up")
	wantCode(t, again, ExitOK)
	if strings.Contains(again.stderr, "created schema") {
		t.Errorf("second migrate up created the schema again:\n%s", again.stderr)
	}
}

// migrate status on a DSN whose search_path names a schema that does not
// exist yet (the state before the first migrate up) answers version 0 with
// every migration pending, as for a missing SQLite file, and creates
// nothing: migrate up still creates the schema afterwards.
func TestMigrateStatusOfAMissingSchema(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.MissingSchemaDSN(t)
	e := env{EnvDSN: dsn}
	st := runCLI(t, e, "migrate", "status", "-o", "json")
	wantCode(t, st, ExitOK)
	m := st.json(t)
	if m["status"] != "ok" || m["version"] != float64(0) {
		t.Fatalf("migrate status of a missing schema: %v", m)
	}
	for _, mig := range m["migrations"].([]any) {
		if s := mig.(map[string]any)["state"]; s != "pending" {
			t.Errorf("migration %v is %v, want pending", mig, s)
		}
	}
	up := runCLI(t, e, "migrate", "up")
	wantCode(t, up, ExitOK)
	if !strings.Contains(up.stderr, "created schema") {
		t.Errorf("migrate up after status did not create the schema; stderr:\n%s", up.stderr)
	}
}

// A schema a newer release migrated (a rolling deploy migrates first) is
// reported at its own version by migrate status and up, not at the newest
// this leasectl knows, and migrate down refuses it naming the fix. status
// and up said "schema version 4, latest known 4" of a schema at 5 (a
// rollback script comparing the two would go ahead), and down failed with
// goose's "version not found".
func TestMigrateReportsASchemaNewerThanItKnows(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	e := env{EnvDSN: dsn}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	newer := int64(migrations.LatestVersion + 1)
	if _, err := conn.Exec(t.Context(), "INSERT INTO leasestore_goose_db_version (version_id, is_applied) VALUES ($1, true)", newer); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"status", "up"} {
		o := runCLI(t, e, "migrate", cmd, "-o", "json")
		wantCode(t, o, ExitOK)
		if v := o.json(t)["version"]; v != float64(newer) {
			t.Errorf("migrate %s: version %v, want %d", cmd, v, newer)
		}
	}
	down := runCLI(t, e, "migrate", "down")
	wantCode(t, down, ExitUsage)
	if !strings.Contains(down.stderr, "newer") {
		t.Errorf("migrate down of a newer schema does not say why:\n%s", down.stderr)
	}
	if v := migratedVersion(t, e); v != newer {
		t.Errorf("version %d after the refused down, want %d", v, newer)
	}
}

// migrate up that runs out of --timeout waiting for the migration lock
// (another deploy migrating the schema) says so and what to do; it said
// only "context deadline exceeded".
func TestMigrateTimeoutNamesTheLock(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	// The schema's migration lock, as migrations.NewProvider derives it.
	h := fnv.New64a()
	h.Write([]byte("leasestore:" + schema))
	if _, err := conn.Exec(t.Context(), "SELECT pg_advisory_lock($1)", int64(h.Sum64()>>1)); err != nil {
		t.Fatal(err)
	}
	o := runCLI(t, env{EnvDSN: dsn}, "migrate", "up", "--timeout", "1s")
	wantCode(t, o, ExitUnavailable)
	if !strings.Contains(o.stderr, "migration lock") || !strings.Contains(o.stderr, "--timeout") {
		t.Fatalf("migrate up that timed out waiting for the lock does not say so:\n%s", o.stderr)
	}
}
