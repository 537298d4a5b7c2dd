package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// sqlite:PATH?mode=ro is the URI habit (a query after a plain path, not a
// file: URI). leasectl must not take "leases.db?mode=ro" as a new file
// name and answer from an empty store made for it: it reads leases.db
// (as sqlite:file:leases.db?mode=ro does), or refuses the DSN (exit 2)
// with the form to write, as it refuses sqlite://leases.db. It created
// "leases.db?mode=ro" beside the store and answered not_found (exit 4)
// for a key that leases.db holds.
func TestReviewSQLitePathWithAQueryIsNotANewFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "leases.db")
	wantCode(t, runCLI(t, env{EnvDSN: "sqlite:" + path}, "acquire", "k", "--owner", "w", "--ttl", "1h"), 0)
	o := runCLI(t, env{EnvDSN: "sqlite:" + path + "?mode=ro"}, "get", "k")
	if _, err := os.Stat(path + "?mode=ro"); err == nil {
		t.Errorf("get on sqlite:%s?mode=ro created the file %q", path, path+"?mode=ro")
	}
	if o.code != ExitOK && o.code != ExitUsage {
		t.Errorf("get k on sqlite:%s?mode=ro: exit %d, want 0 (the lease in leases.db) or %d (refused)\nstdout: %s\nstderr: %s",
			path, o.code, ExitUsage, o.stdout, o.stderr)
	}
}
