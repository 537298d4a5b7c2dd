package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgbouncer"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// bench's coalescing flags are refused (exit 2, naming why, before a
// measurement) where they cannot apply, rather than silently ignored:
// --max-in-flight, PostgreSQL's cap, on SQLite (which writes one
// transaction at a time), on etcd (which does not coalesce), beside
// --no-coalescing and behind a transaction pooler (no coalescing either);
// both flags against a served store, whose coalescing is the server's.
// The unreachable DSNs show that the refusal comes before the store is
// opened.
func TestBenchRefusesCoalescingFlagsThatCannotApply(t *testing.T) {
	t.Parallel()
	sqlite := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	for _, c := range []struct {
		dsn  string
		args []string
		want []string // the message names these
	}{
		{sqlite, []string{"--max-in-flight", "4"}, []string{"--max-in-flight", "SQLite"}},
		{sqlite, []string{"--max-in-flight", "4", "--no-coalescing"}, []string{"--max-in-flight", "SQLite"}},
		{"etcd://127.0.0.1:1/bench", []string{"--max-in-flight", "4"}, []string{"--max-in-flight", "etcd"}},
		{"http://127.0.0.1:1", []string{"--max-in-flight", "4"}, []string{"--max-in-flight", "served store", "database's DSN"}},
		{"http://127.0.0.1:1", []string{"--no-coalescing"}, []string{"--no-coalescing", "served store", "database's DSN"}},
		{"postgres://root@127.0.0.1:1/test", []string{"--max-in-flight", "4", "--no-coalescing"}, []string{"--max-in-flight", "--no-coalescing"}},
		{"postgres://root@127.0.0.1:1/test?pooler=transaction", []string{"--max-in-flight", "4"}, []string{"--max-in-flight", "pooler=transaction"}},
	} {
		args := append([]string{"bench", "--dsn", c.dsn, "-d", "300ms", "--warm-up", "0s", "--timeout", "1s"}, c.args...)
		o := runCLI(t, env{}, args...)
		if o.code != ExitUsage {
			t.Errorf("leasectl %s: exit %d, want %d (usage)\nstdout: %s\nstderr: %s", strings.Join(args, " "), o.code, ExitUsage,
				o.stdout, o.stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(o.stderr, w) {
				t.Errorf("leasectl %s: stderr %q does not name %q", strings.Join(args, " "), o.stderr, w)
			}
		}
	}
}

// Where --max-in-flight applies, PostgreSQL without a pooler, bench runs
// with it.
func TestBenchMaxInFlightRunsOnPostgres(t *testing.T) {
	t.Parallel()
	o := runCLI(t, migratedPostgresEnv(t), "bench", "--max-in-flight", "2", "-c", "4", "-d", "300ms", "--warm-up", "0s", "-o", "json")
	wantCode(t, o, ExitOK)
	if m := o.json(t); m["backend"] != "postgres" || m["ops"].(float64) == 0 {
		t.Errorf("bench --max-in-flight 2 on PostgreSQL: %v, want a measurement", m)
	}
}

// A transaction pooler the DSN does not name, found when the store
// opens, refuses --max-in-flight too (exit 2), before a measurement.
func TestBenchRefusesMaxInFlightBehindAFoundPooler(t *testing.T) {
	t.Parallel()
	dsn := pgbouncer.Start(t).DSN(t, pgtest.MigratedDSN(t))
	o := runCLI(t, env{}, "bench", "--dsn", dsn, "--max-in-flight", "2", "-d", "300ms", "--warm-up", "0s")
	wantCode(t, o, ExitUsage)
	if !strings.Contains(o.stderr, "--max-in-flight") || !strings.Contains(o.stderr, "pooler") || strings.Contains(o.stderr, "bench: starting") {
		t.Errorf("bench --max-in-flight through PgBouncer: stderr %q: want it refused naming the pooler, before any measurement", o.stderr)
	}
}
