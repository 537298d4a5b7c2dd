package cli

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// The operator guide's advice, followed literally: migrate up with a search_path
// naming a schema that does not exist yet creates the schema (the
// operator's own) and migrates into it; the store then works.
func TestMigrateUpCreatesTheSearchPathSchema(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.MissingSchemaDSN(t)
	e := env{EnvDSN: dsn}
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
