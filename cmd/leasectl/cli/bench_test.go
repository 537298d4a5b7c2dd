package cli

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// bench -c 1,2 --compare-raw measures the raw baseline and the store at
// each concurrency, alternating, prints one JSON object (DESIGN: exactly
// one with -o json) whose runs hold a row per measurement with the DESIGN
// keys, the subject and the store's ratio to the raw rate, and
// removes the baseline's scratch tables (PostgreSQL: its schema; SQLite: its
// file) afterwards.
func TestBenchCompareRaw(t *testing.T) {
	for name, mk := range sqlEnvs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			o := runCLI(t, e, "bench", "-c", "1,2", "--compare-raw", "--duration", "300ms", "--warm-up", "0s",
				"--keys", "50", "-n", "benchraw", "-o", "json")
			wantCode(t, o, 0)
			top := o.json(t)
			wantKeys(t, "bench", top, "status", "backend", "namespace", "op", "keys", "runs")
			if top["status"] != "ok" || top["backend"] != name || top["namespace"] != "benchraw" ||
				top["op"] != benchAcquireRelease || top["keys"] != float64(50) {
				t.Fatalf("bench: %v", top)
			}
			lines := top["runs"].([]any)
			if len(lines) != 4 {
				t.Fatalf("want 4 runs (raw and store at 1 and 2), got:\n%s", o.stdout)
			}
			wantOrder := []struct {
				subject string
				c       float64
			}{{"raw", 1}, {"leasestore", 1}, {"raw", 2}, {"leasestore", 2}}
			var rawRate float64
			for i, line := range lines {
				m := line.(map[string]any)
				want := append([]string{"backend", "namespace", "op", "concurrency", "keys", "ops", "errors",
					"conflicts", "duration_s", "ops_per_sec", "p50_ms", "p99_ms", "subject", "client_cpu_us_per_op"},
					map[bool][]string{true: {"ratio_to_raw"}}[wantOrder[i].subject == "leasestore"]...)
				if name == "postgres" {
					// The server runs on this host: its processes' CPU is read.
					want = append(want, "server_cpu_us_per_op")
				}
				wantKeys(t, "bench row", m, want...)
				if m["client_cpu_us_per_op"].(float64) <= 0 || (name == "postgres" && m["server_cpu_us_per_op"].(float64) <= 0) {
					t.Fatalf("line %d: CPU figures: %v", i, m)
				}
				if m["subject"] != wantOrder[i].subject || m["concurrency"] != wantOrder[i].c || m["backend"] != name ||
					m["errors"] != float64(0) || m["ops"].(float64) < 1 || m["p99_ms"].(float64) < m["p50_ms"].(float64) {
					t.Fatalf("line %d: %v", i, m)
				}
				rate := m["ops_per_sec"].(float64)
				if m["subject"] == "raw" {
					rawRate = rate
					continue
				}
				if m["namespace"] != "benchraw" {
					t.Fatalf("line %d: namespace %v", i, m["namespace"])
				}
				if got, want := m["ratio_to_raw"].(float64), rate/rawRate; math.Abs(got-want) > 0.002 {
					t.Fatalf("line %d: ratio_to_raw %v, want %v (%v / %v)", i, got, want, rate, rawRate)
				}
			}
			switch name {
			case "sqlite":
				dir := filepath.Dir(strings.TrimPrefix(e[EnvDSN], "sqlite:"))
				left, _ := filepath.Glob(filepath.Join(dir, "leasestore-raw-*"))
				if len(left) != 0 {
					t.Fatalf("the raw baseline's files are left: %v", left)
				}
			case "postgres":
				m := regexp.MustCompile(`schema=(leasestore_raw_[0-9a-f]{8})`).FindStringSubmatch(o.stderr)
				if m == nil {
					t.Fatalf("no raw baseline schema logged:\n%s", o.stderr)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				conn, err := pgx.Connect(ctx, e[EnvDSN])
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				var exists bool
				if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, m[1]).Scan(&exists); err != nil {
					t.Fatal(err)
				}
				if exists {
					t.Fatalf("schema %s is left behind", m[1])
				}
			}

			table := runCLI(t, e, "bench", "-c", "1", "--compare-raw", "--duration", "200ms", "--keys", "50")
			wantCode(t, table, 0)
			for _, want := range []string{"concurrency", "subject", "p50 ms", "p99 ms", "server CPU µs/op", "ratio", "raw", "leasestore", "×"} {
				if !strings.Contains(table.stdout, want) {
					t.Fatalf("table lacks %q:\n%s", want, table.stdout)
				}
			}
		})
	}
}

// A sweep without --compare-raw prints one row per concurrency; bad lists
// and a raw comparison of a workload it does not run are usage errors,
// refused before the store is opened.
func TestBenchSweepAndUsage(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	o := runCLI(t, e, "bench", "-c", "1,3", "--duration", "200ms", "--keys", "4", "-o", "json")
	wantCode(t, o, 0)
	runs, _ := o.json(t)["runs"].([]any)
	if len(runs) != 2 || runs[0].(map[string]any)["concurrency"] != float64(1) || runs[1].(map[string]any)["concurrency"] != float64(3) ||
		strings.Contains(o.stdout, "ratio_to_raw") {
		t.Fatalf("sweep output:\n%s", o.stdout)
	}
	// --no-coalescing runs (and says so in the table).
	off := runCLI(t, e, "bench", "-c", "1,2", "--no-coalescing", "--duration", "200ms", "--keys", "4")
	wantCode(t, off, 0)
	if !strings.Contains(off.stdout, "coalescing off") {
		t.Fatalf("--no-coalescing table:\n%s", off.stdout)
	}
	for _, args := range [][]string{
		{"-c", "0"}, {"-c", "1,2000"}, {"-c", "1,x"}, {"--compare-raw", "--op", "renew"}, {"--warm-up", "-1s"},
		{"--max-in-flight", "-1"},
	} {
		fresh := sqliteEnv(t)
		o := runCLI(t, fresh, append([]string{"bench", "--duration", "100ms"}, args...)...)
		wantCode(t, o, 2)
		if _, err := os.Stat(strings.TrimPrefix(fresh[EnvDSN], "sqlite:")); err == nil {
			t.Fatalf("bench %v created the store before refusing", args)
		}
	}
}
