package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestWritingCommandOnAReadOnlySQLiteURISaysReadOnly: a command that
// migrates the SQLite file it opens (acquire, and every command on the
// embedded store: first use migrates) given a read-only URI (mode=ro) on
// a file with a migration pending says the file is read-only, exit 5
// (unavailable), as every other refusal of such a file does, not goose's
// "partial migration error", which reads as if part of a migration had
// been applied (none was).
func TestWritingCommandOnAReadOnlySQLiteURISaysReadOnly(t *testing.T) {
	t.Parallel()
	file := filepath.ToSlash(filepath.Join(t.TempDir(), "leases.db"))
	rw := env{EnvDSN: "sqlite:" + file}
	ro := env{EnvDSN: "sqlite:file:" + file + "?mode=ro"}
	wantCode(t, runCLI(t, rw, "acquire", "k", "--owner", "o"), 0)
	wantCode(t, runCLI(t, rw, "migrate", "down"), 0) // a migration pending
	for _, args := range [][]string{{"acquire", "k2", "--owner", "o"}, {"revoke", "k", "--reason", "r"}} {
		o := runCLI(t, ro, args...)
		if o.code != ExitUnavailable || !strings.Contains(o.stderr, "read-only") || strings.Contains(o.stderr, "partial migration") {
			t.Errorf("leasectl %s on a read-only SQLite URI: exit %d; want %d (unavailable) saying the file is read-only, "+
				"not that a migration was partly applied\nstderr: %s", strings.Join(args, " "), o.code, ExitUnavailable, o.stderr)
		}
	}
}
