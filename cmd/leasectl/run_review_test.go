//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The operator guide (run): "CMD is looked up in $PATH, and a script's
// interpreter checked, first, so one that cannot be started takes no
// lease and waits for none"; run's help: "A CMD that cannot be started
// (looked up, and a script's #! interpreter checked, before the lease is
// taken, so it takes none) exits 127 (not found) or 126". An executable
// script without a #! line cannot be started by run (exec format error,
// 126), yet run takes the lease first: on a held key it exits 3 (and
// with --wait it would wait for the holder) instead of 126, and on a free
// key it leaves an acquire and a release in the trail.
func TestRunOfAScriptWithoutInterpreterLineTakesNoLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	script := filepath.Join(dir, "report")
	if err := os.WriteFile(script, []byte("echo report\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.runJSON(t, 0, "acquire", "held", "--owner", "other")
	if r := c.run(t, "run", "held", "--", script); r.code != 126 {
		t.Errorf("run of a held key with a CMD that cannot be started (no #! line): exit %d, want 126 (it takes no lease and waits for none)\n%s", r.code, r)
	}
	if r := c.run(t, "run", "free", "--", script); r.code != 126 {
		t.Fatalf("run of a CMD that cannot be started (no #! line): exit %d, want 126\n%s", r.code, r)
	}
	if recs := c.runJSON(t, 0, "audit", "--key", "free")["records"].([]any); len(recs) != 0 {
		t.Errorf("run of a CMD that cannot be started (no #! line) left %d records in the trail of its key, want none (it takes no lease): %v", len(recs), recs)
	}
}
