package cli

import (
	"strings"
	"testing"
)

// --dsn sqlite:~/leases.db is what a user types for a file in the home
// directory, but the shell expands ~ only at the start of a word, so
// leasectl gets the ~ as it is: it is refused as invalid (exit 2), saying
// so and what to write. It failed as unavailable (exit 5), saying only
// "check that the path names a file in an existing, writable directory".
func TestSQLiteDSNWithTildeSaysTheShellDidNotExpandIt(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{EnvDSN: "sqlite:~/leases.db"}, "get", "k")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "sqlite:$HOME/leases.db") || !strings.Contains(o.stderr, "~") {
		t.Errorf("get with --dsn sqlite:~/leases.db: exit %d, want %d saying the shell did not expand ~ and to write sqlite:$HOME/leases.db\n%s",
			o.code, ExitUsage, o.stderr)
	}
}
