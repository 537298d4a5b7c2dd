package cli

import (
	"strings"
	"testing"
)

// pgx reads a URL DSN whose password holds an unescaped '?'
// (postgres://root:S3c?retPW@host/db: it connects with that password), so
// leasectl must mask it as it masks any DSN password. It printed the DSN
// as given, on stderr and in the JSON on stdout. (Port 1: the connection
// is refused at once and the error quotes the DSN.)
func TestReviewURLPasswordWithAQuestionMarkIsMasked(t *testing.T) {
	t.Parallel()
	dsn := "postgres://root:S3c?retPW@127.0.0.1:1/test"
	for _, out := range []string{"table", "json"} {
		o := runCLI(t, env{EnvDSN: dsn}, "health", "-o", out)
		if o.code == 0 {
			t.Fatalf("health on %s: exit 0, want a refusal", dsn)
		}
		if strings.Contains(o.stdout+o.stderr, "retPW") {
			t.Errorf("health -o %s with DSN %q prints its password\nstdout: %s\nstderr: %s", out, dsn, o.stdout, o.stderr)
		}
	}
}
