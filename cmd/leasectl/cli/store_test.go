package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Invalid input is answered before the store is opened: a SQLite store
// that does not exist yet stays uncreated.
func TestInvalidInputLeavesTheStoreAlone(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"acquire", "x", "--ttl", "-1s"},
		{"acquire", "x", "--owner", ""},
		{"acquire", "x", "--request-id", "bad\x01id"},
		{"renew", "x", "--token", "-3"},
		{"release", "x", "--token", "0"},
		{"get", "bad\x01key"},
		{"get", "x", "-n", ""},
		{"revoke", "x", "--reason", ""},
		{"list", "--limit", "5000"},
		{"list", "-n", ""},
		{"audit", "--limit", "5000"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "leases.db")
			for _, out := range []string{"table", "json"} {
				o := runCLI(t, env{EnvDSN: "sqlite:" + file}, append(args, "-o", out)...)
				wantCode(t, o, ExitUsage)
				if out == "json" && o.json(t)["status"] != "invalid" {
					t.Errorf("JSON status: %s", o.stdout)
				}
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Fatalf("invalid input created the store %s (stat: %v)", file, err)
			}
		})
	}
}

// migrate status and migrate down report a SQLite store that does not
// exist as unmigrated, without creating it.
func TestMigrateReadsDoNotCreateTheFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "leases.db")
	e := env{EnvDSN: "sqlite:" + file}
	st := runCLI(t, e, "migrate", "status", "-o", "json")
	wantCode(t, st, ExitOK)
	m := st.json(t)
	if m["version"] != float64(0) || m["latest"] == float64(0) {
		t.Fatalf("migrate status of a missing file: %v", m)
	}
	ms := m["migrations"].([]any)
	if len(ms) == 0 || ms[0].(map[string]any)["state"] != "pending" {
		t.Fatalf("migrate status of a missing file lists %v, want every migration pending", ms)
	}
	table := runCLI(t, e, "migrate", "status")
	wantCode(t, table, ExitOK)
	if !strings.Contains(table.stdout, "pending") || !strings.Contains(table.stdout, "does not exist") {
		t.Errorf("migrate status table of a missing file:\n%s", table.stdout)
	}
	down := runCLI(t, e, "migrate", "down", "-o", "json")
	wantCode(t, down, ExitOK)
	if d := down.json(t); d["version"] != float64(0) || len(d["migrations"].([]any)) != 0 {
		t.Fatalf("migrate down of a missing file: %v", d)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("migrate status/down created %s (stat: %v)", file, err)
	}
}

// A lease command whose store cannot be opened answers, with -o json, the
// shape of its result carrying the request id the user gave
// (--request-id), as its answer from the store would: a script that runs
// the command again with that id after an unknown outcome reads it there.
func TestOpenFailureKeepsTheRequestID(t *testing.T) {
	t.Parallel()
	// A file that is no database: the open fails as unavailable (a
	// directory that does not exist is refused before, as invalid input).
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database; ", 256)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := env{EnvDSN: "sqlite:" + garbage}
	for _, args := range [][]string{
		{"acquire", "k", "--owner", "o"},
		{"renew", "k", "--owner", "o", "--token", "1"},
		{"release", "k", "--owner", "o", "--token", "1"},
		{"revoke", "k", "--reason", "r"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, e, append(args, "--request-id", "req-open-1", "-o", "json")...)
			m := o.json(t)
			if o.code != ExitUnavailable {
				t.Errorf("exit code %d, want %d: %s", o.code, ExitUnavailable, o.stdout)
			}
			if m["request_id"] != "req-open-1" {
				t.Errorf("request_id %q, want the one given, req-open-1: %s", m["request_id"], o.stdout)
			}
		})
	}
}
