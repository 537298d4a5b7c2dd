package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteDSNTheStoreRefusesIsInvalidInput: a sqlite: DSN that the
// SQLite backend refuses for what it says, whatever the file holds (an
// in-memory database; a URI parameter that turns the file locks off,
// shares the page cache, reads the file as immutable; a _pragma it
// refuses or cannot read), is bad input that no retry will cure: the
// refusal says "remove it" or "name a file". DESIGN.md: exit 2 for
// invalid input or usage, 5 for timeout/unavailable (whose rule is: retry).
// leasectl answers these with status unavailable and exit 5, so a script
// that retries on 5 retries forever; a ~ left unexpanded in the same DSN
// is already refused as invalid, exit 2 (TestSQLiteDSNWithTildeSaysTheShellDidNotExpandIt).
func TestSQLiteDSNTheStoreRefusesIsInvalidInput(t *testing.T) {
	t.Parallel()
	file := filepath.ToSlash(filepath.Join(t.TempDir(), "leases.db"))
	if o := runCLI(t, env{EnvDSN: "sqlite:" + file}, "health"); o.code != 0 {
		t.Fatalf("health on a fresh file: exit %d\n%s", o.code, o.stderr)
	}
	for _, dsn := range []string{
		"sqlite::memory:",
		"sqlite:file::memory:?cache=shared",
		"sqlite:file:" + file + "?mode=memory",
		"sqlite:file:" + file + "?nolock=1",
		"sqlite:file:" + file + "?vfs=unix-none",
		"sqlite:file:" + file + "?immutable=1",
		"sqlite:file:" + file + "?cache=shared",
		"sqlite:file:" + file + "?_pragma=locking_mode(exclusive)",
		"sqlite:file:" + file + "?_pragma=read_uncommitted(1)",
		"sqlite:file:" + file + "?_pragma=not%20a%20pragma",
	} {
		o := runCLI(t, env{EnvDSN: dsn}, "-o", "json", "get", "k")
		var status any
		if strings.HasPrefix(strings.TrimSpace(o.stdout), "{") {
			status = o.json(t)["status"]
		}
		if o.code != ExitUsage || status != "invalid" {
			t.Errorf("get with --dsn %s: exit %d, status %v; want %d and invalid (the DSN is refused for what it says: "+
				"bad input, not an outage to retry)\nstdout: %s\nstderr: %s", dsn, o.code, status, ExitUsage, o.stdout, o.stderr)
		}
	}
}
