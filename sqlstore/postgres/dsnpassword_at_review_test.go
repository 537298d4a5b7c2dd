package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestOpenErrorShowsNoPartOfAPasswordWithAnAt opens a URL DSN whose
// password holds an "@" written as is, not as %40 (an operator's common
// slip): the server cannot be reached, and the error must show no part of
// the password. The DSN's text is split at the first "@", so the password's
// tail reads as part of the host, and the error names that host.
func TestOpenErrorShowsNoPartOfAPasswordWithAnAt(t *testing.T) {
	t.Parallel()
	const head, tail = "correct", "horse-battery-staple"
	dsn := "postgres://app:" + head + "@" + tail + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"
	b, err := postgres.Open(ctxT(t), dsn, nil)
	if err == nil {
		_ = b.Close(context.Background())
		t.Fatal("open succeeded")
	}
	for _, part := range []string{head + "@" + tail, tail} {
		if strings.Contains(err.Error(), part) {
			t.Fatalf("the error shows %q of the password %q: %v", part, head+"@"+tail, err)
		}
	}
}
