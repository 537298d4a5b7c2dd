package cli

import (
	"strings"
	"testing"
)

// A PostgreSQL DSN that does not parse (a port past 65535, an sslmode
// that does not exist) is bad input: exit 2 invalid, as every other
// command answers it (health, get). migrate answered exit 5 unavailable,
// which a deploy script retries as an outage.
func TestReviewMigrateRefusesAMalformedDSNAsInvalid(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://root@127.0.0.1:99999/test",
		"postgres://root@127.0.0.1:5432/test?sslmode=bogus",
	} {
		e := env{EnvDSN: dsn}
		if o := runCLI(t, e, "health"); o.code != ExitUsage {
			t.Fatalf("health on %s: exit %d, want %d (the reference)\n%s", dsn, o.code, ExitUsage, o.stderr)
		}
		for _, sub := range []string{"status", "up", "down"} {
			o := runCLI(t, e, "migrate", sub)
			if o.code != ExitUsage {
				t.Errorf("migrate %s on %s: exit %d, want %d (invalid input, as health answers)\n%s",
					sub, dsn, o.code, ExitUsage, strings.TrimSpace(o.stderr))
			}
		}
	}
}
