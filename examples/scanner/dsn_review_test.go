package main

import (
	"context"
	"strings"
	"testing"
)

// The scanner opens etcd:// DSNs too (its doc and -dsn's usage say so), so
// the messages refusing a missing or unknown DSN name that form beside
// sqlite: and postgres://: a user with an etcd cluster is not told that
// only SQL stores will do.
func TestDSNErrorsNameEveryAcceptedForm(t *testing.T) {
	t.Setenv("LEASESTORE_DSN", "")
	for _, args := range [][]string{{}, {"-dsn", "mysql://x"}, {"-dsn", "nocolon"}} {
		var stdout, stderr strings.Builder
		code := run(context.Background(), args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "etcd://") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message naming etcd:// among the accepted DSNs", args, code, stderr.String())
		}
	}
}
