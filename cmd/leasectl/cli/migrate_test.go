package cli

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// postgresEnv returns an environment whose LEASESTORE_DSN is a fresh, empty
// PostgreSQL schema (pgtest: LEASESTORE_TEST_POSTGRES_DSN, else a container,
// else the test is skipped).
func postgresEnv(t *testing.T) env {
	return env{EnvDSN: pgtest.DSN(t)}
}

// migratedVersion returns the version that migrate status reports.
func migratedVersion(t *testing.T, e env) int64 {
	t.Helper()
	o := runCLI(t, e, "migrate", "status", "-o", "json")
	wantCode(t, o, ExitOK)
	return int64(o.json(t)["version"].(float64))
}

// downToFirst rolls back every migration but the first. Those rollbacks
// never need --destroy-data.
func downToFirst(t *testing.T, e env) {
	t.Helper()
	for v := migratedVersion(t, e); v > 1; v-- {
		o := runCLI(t, e, "migrate", "down", "-o", "json")
		wantCode(t, o, ExitOK)
	}
	if v := migratedVersion(t, e); v != 1 {
		t.Fatalf("schema version %d after rolling back to the first migration, want 1", v)
	}
}

// migrateDownRefusesData runs the refusal and --destroy-data on the store of e.
func migrateDownRefusesData(t *testing.T, e env) {
	wantCode(t, runCLI(t, e, "migrate", "up"), ExitOK)
	acq := runCLI(t, e, "acquire", "k", "--owner", "w1", "--ttl", "1h", "-o", "json")
	wantCode(t, acq, ExitOK)
	if tok := token(t, acq.json(t)); tok != 1 {
		t.Fatalf("first token %d, want 1", tok)
	}
	// Tokens grow: the lease at k now has token 2.
	wantCode(t, runCLI(t, e, "release", "k", "--owner", "w1", "--token", "1"), ExitOK)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w1", "--ttl", "1h"), ExitOK)

	downToFirst(t, e)
	refused := runCLI(t, e, "migrate", "down", "-o", "json")
	wantCode(t, refused, ExitUsage)
	m := refused.json(t)
	wantKeys(t, "refusal", m, "status", "message")
	msg, _ := m["message"].(string)
	if m["status"] != "invalid" || !strings.Contains(msg, "--destroy-data") {
		t.Fatalf("migrate down of a store holding data: %v; want invalid naming --destroy-data", m)
	}
	text := runCLI(t, e, "migrate", "down")
	wantCode(t, text, ExitUsage)
	if text.stdout != "" || !strings.Contains(text.stderr, "--destroy-data") {
		t.Fatalf("migrate down (table) of a store holding data: stdout %q, stderr %q", text.stdout, text.stderr)
	}
	if v := migratedVersion(t, e); v != 1 {
		t.Fatalf("schema version %d after a refused down, want 1", v)
	}
	// Nothing was dropped: the lease is there with its token.
	wantCode(t, runCLI(t, e, "migrate", "up"), ExitOK)
	get := runCLI(t, e, "get", "k", "-o", "json")
	wantCode(t, get, ExitOK)
	if tok := token(t, get.json(t)); tok != 2 {
		t.Fatalf("after a refused down, the lease at k has token %d, want 2", tok)
	}

	downToFirst(t, e)
	destroyed := runCLI(t, e, "migrate", "down", "--destroy-data", "-o", "json")
	wantCode(t, destroyed, ExitOK)
	if m := destroyed.json(t); m["status"] != "ok" || m["version"] != float64(0) || len(m["migrations"].([]any)) != 1 {
		t.Fatalf("migrate down --destroy-data: %v", m)
	}
	// What the help says it destroys: tokens start again at 1.
	wantCode(t, runCLI(t, e, "migrate", "up"), ExitOK)
	again := runCLI(t, e, "acquire", "k", "--owner", "w2", "-o", "json")
	wantCode(t, again, ExitOK)
	if tok := token(t, again.json(t)); tok != 1 {
		t.Fatalf("token after down --destroy-data and up: %d, want 1", tok)
	}
}

// migrateDownOfAnEmptyStore rolls every migration back without --destroy-data.
func migrateDownOfAnEmptyStore(t *testing.T, e env) {
	wantCode(t, runCLI(t, e, "migrate", "up"), ExitOK)
	for v := migratedVersion(t, e); v > 0; v-- {
		o := runCLI(t, e, "migrate", "down", "-o", "json")
		wantCode(t, o, ExitOK)
		if m := o.json(t); m["version"] != float64(v-1) {
			t.Fatalf("migrate down from %d of an empty store: %v", v, m)
		}
	}
}

func TestMigrateDownRefusesToDropData(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		migrateDownRefusesData(t, sqliteEnv(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		migrateDownRefusesData(t, postgresEnv(t))
	})
}

func TestMigrateDownOfAnEmptyStore(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		migrateDownOfAnEmptyStore(t, sqliteEnv(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		migrateDownOfAnEmptyStore(t, postgresEnv(t))
	})
}

// The help of migrate down says what --destroy-data destroys.
func TestMigrateDownHelpSaysWhatIsDestroyed(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "migrate", "down", "--help")
	wantCode(t, o, ExitOK)
	for _, s := range []string{"--destroy-data", "every lease", "whole audit trail", "fencing counter",
		"start again at 1", "refuse"} {
		if !strings.Contains(o.stdout, s) {
			t.Errorf("migrate down --help does not mention %q:\n%s", s, o.stdout)
		}
	}
}
