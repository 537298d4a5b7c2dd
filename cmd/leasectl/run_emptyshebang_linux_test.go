package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The operator guide (run): a CMD that cannot be started takes no lease,
// and on Linux that includes a file in no format the kernel executes
// (exec format error, 126). A script whose #! line names no interpreter
// ("#!" followed by blanks only) is such a file: the kernel refuses it
// with ENOEXEC. Yet run lets any file beginning with #! pass unchecked,
// so it takes the lease (3 on a held key, an acquire and a release in
// the trail of a free one) before the start fails.
func TestRunOfAScriptWhoseInterpreterLineIsEmptyTakesNoLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	c.runJSON(t, 0, "acquire", "held", "--owner", "other")
	for _, tc := range []struct{ name, text string }{{"bare", "#!\necho report\n"}, {"blanks", "#! \t \necho report\n"}} {
		name, text := tc.name, tc.text
		script := filepath.Join(dir, name)
		if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		if r := c.run(t, "run", "held", "--", script); r.code != 126 {
			t.Errorf("run of a held key with a script whose #! line names no interpreter (%q): exit %d, want 126 (it takes no lease and waits for none)\n%s", text, r.code, r)
		}
		if r := c.run(t, "run", name, "--", script); r.code != 126 {
			t.Fatalf("run of a script whose #! line names no interpreter (%q): exit %d, want 126\n%s", text, r.code, r)
		}
		if recs := c.runJSON(t, 0, "audit", "--key", name)["records"].([]any); len(recs) != 0 {
			t.Errorf("run of a script whose #! line names no interpreter (%q) left %d records in the trail of its key, want none (it takes no lease): %v", text, len(recs), recs)
		}
	}
}
