package cli

import (
	"strings"
	"testing"
)

// A key=value DSN may write its password in any form libpq and pgx read:
// with blanks around '=' (password = X), or quoted with an escaped quote
// inside (password='a\'b'). leasectl never prints that password, in its
// error message on stderr nor in the JSON on stdout. (Port 1: the
// connection is refused at once and the error quotes the DSN.)
func TestReviewKeyValuePasswordFormsAreMasked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dsn, secret string }{
		{"host=127.0.0.1 port=1 user=root password = S3cretPW dbname=test sslmode=disable", "S3cretPW"},
		{`host=127.0.0.1 port=1 user=root password='S3c\'retPW' dbname=test sslmode=disable`, "retPW"},
	} {
		for _, out := range []string{"table", "json"} {
			o := runCLI(t, env{EnvDSN: c.dsn}, "health", "-o", out)
			if o.code == 0 {
				t.Fatalf("health on %s: exit 0, want a refusal", c.dsn)
			}
			if strings.Contains(o.stdout, c.secret) || strings.Contains(o.stderr, c.secret) {
				t.Errorf("health -o %s with DSN %q prints its password %q\nstdout: %s\nstderr: %s",
					out, c.dsn, c.secret, o.stdout, o.stderr)
			}
		}
	}
}
