package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteDSNInAMissingDirectoryIsUsage: a --dsn sqlite:PATH whose
// directory does not exist (or is a file) names a store that cannot be:
// no retry helps, the command line must change. Every command that opens
// a store refuses it as invalid input, exit 2, naming the directory and the
// fix, before anything is made; it answered unavailable, exit 5, as an
// outage.
func TestSQLiteDSNInAMissingDirectoryIsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such")
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"get", "k"}, {"describe", "k"}, {"list"}, {"namespaces"}, {"health"},
		{"acquire", "k", "--owner", "w"}, {"renew", "k", "--owner", "w", "--token", "1"},
		{"release", "k", "--owner", "w", "--token", "1"}, {"revoke", "k", "--reason", "r"},
		{"audit"}, {"audit", "export"}, {"audit", "prune", "--before", "1h", "--yes"}, {"watch"},
		{"gc"}, {"fencing", "raise"}, {"migrate", "up"}, {"migrate", "down"}, {"migrate", "status"},
		{"run", "k", "--", "true"}, {"serve", "--listen", "127.0.0.1:0"}, {"bench", "--duration", "1s"},
		{"demo"},
	}
	for _, tc := range []struct{ dir, says, fix string }{
		{missing, "does not exist", "mkdir -p " + missing},
		{file, "is not a directory", "name a file in an existing directory"},
	} {
		dsn := "sqlite:" + filepath.Join(tc.dir, "x.db")
		for _, args := range commands {
			o := runCLI(t, env{}, append([]string{"--dsn", dsn}, args...)...)
			if o.code != ExitUsage || !strings.Contains(o.stderr, tc.dir+" "+tc.says) || !strings.Contains(o.stderr, tc.fix) {
				t.Errorf("%q --dsn %s: exit %d, stderr %q; want exit %d saying %s %s and how to fix it (%s)",
					args, dsn, o.code, o.stderr, ExitUsage, tc.dir, tc.says, tc.fix)
			}
		}
	}
	o := runCLI(t, env{}, "--dsn", "sqlite:"+filepath.Join(missing, "x.db"), "get", "k", "-o", "json")
	if o.code != ExitUsage || o.json(t)["status"] != "invalid" {
		t.Errorf("get -o json in a missing directory: exit %d, %s; want exit %d and status invalid", o.code, o.stdout, ExitUsage)
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !os.IsNotExist(err) {
		t.Errorf("a refused command made the missing directory: %v", err)
	}
}
