package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMigrateOfAReadOnlySQLiteFileSaysReadOnly: migrate up or down on a
// SQLite file this process cannot write (here opened with mode=ro, as a
// file without write permission, on a read-only mount or in a directory
// it cannot write is) fails with exit 1 and goose's "partial migration
// error ... failed to insert version 11: attempt to write a readonly
// database", which reads as if part of a migration had been applied (none
// was). Every other command on the same file answers unavailable, exit 5,
// saying the file is read-only and what needs to be writable
// (TestReadOnlySQLite). DESIGN.md: 5 for timeout/unavailable (the store
// refused service), 1 for anything else; bad input and refusals get a
// clear error.
func TestMigrateOfAReadOnlySQLiteFileSaysReadOnly(t *testing.T) {
	t.Parallel()
	file := filepath.ToSlash(filepath.Join(t.TempDir(), "leases.db"))
	rw := env{EnvDSN: "sqlite:" + file}
	ro := env{EnvDSN: "sqlite:file:" + file + "?mode=ro"}
	if o := runCLI(t, rw, "acquire", "k", "--owner", "o"); o.code != 0 {
		t.Fatalf("acquire on a fresh file: exit %d\n%s", o.code, o.stderr)
	}
	if o := runCLI(t, rw, "migrate", "down"); o.code != 0 {
		t.Fatalf("migrate down on the writable file: exit %d\n%s", o.code, o.stderr)
	}
	before := runCLI(t, rw, "migrate", "status")

	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "down"}} {
		o := runCLI(t, ro, args...)
		if o.code != ExitUnavailable || !strings.Contains(o.stderr, "read-only") || strings.Contains(o.stderr, "partial migration") {
			t.Errorf("leasectl %s on a read-only SQLite file: exit %d; want %d (unavailable) saying the file is read-only, "+
				"not that a migration was partly applied\nstderr: %s", strings.Join(args, " "), o.code, ExitUnavailable, o.stderr)
		}
	}
	if after := runCLI(t, rw, "migrate", "status"); after.stdout != before.stdout {
		t.Errorf("migrate status changed after the refused migrations:\nbefore: %s\nafter: %s", before.stdout, after.stdout)
	}
}
