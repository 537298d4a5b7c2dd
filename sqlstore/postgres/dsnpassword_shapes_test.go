package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// pgx reads a URL DSN as libpq does: the user and password end at the
// first '@' before any '/'. A password written with an '@' or a '/' as is
// is cut there, and its rest is read as a host, a database name or
// parameters, which pgx's errors name. Open and a Config.ListenDSN refuse
// such a DSN as invalid, saying to write the '@' as %40, and show no part
// of the password; DSNs that pgx reads as their writer meant (a '?' in the
// password, an '@' in a parameter's value of a DSN without user info, an
// encoded '@') are not refused.
func TestURLDSNsThatWouldShowPartOfThePasswordAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dsn, secret string }{
		// The password 1234/ect-secret: no user info, host app, port 1234,
		// database ect-secret@127.0.0.1:1/db.
		{"postgres://app:1234/ect-secret@127.0.0.1:1/db?connect_timeout=5", "ect-secret"},
		// The password co@rr?ect-secret: host rr, then parameters, which
		// pgx's parse error repeats.
		{"postgres://app:co@rr?ect-secret@127.0.0.1:1/db?connect_timeout=5", "ect-secret"},
		// The password co@rr?application_name=ect-secret: a parameter.
		{"postgresql://app:co@rr?application_name=ect-secret@127.0.0.1:1/db", "ect-secret"},
		// The user app@corp (an '@' of the user is refused too).
		{"postgres://app@corp:pass-secret@127.0.0.1:1/db", "pass-secret"},
	} {
		b, err := postgres.Open(ctxT(t), c.dsn, nil)
		if err == nil {
			_ = b.Close(context.Background())
			t.Errorf("Open(%q) succeeded", c.dsn)
			continue
		}
		if !errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), "%40") || strings.Contains(err.Error(), c.secret) {
			t.Errorf("Open of a DSN whose password holds %q: %v; want invalid, saying to write an '@' as %%40, without the password", c.secret, err)
		}
	}
	for _, dsn := range []string{
		"postgres://app:S3c?retPW@127.0.0.1:1/db?connect_timeout=5",
		"postgres://app:p%40ss@127.0.0.1:1/db?connect_timeout=5",
		"postgres://127.0.0.1:1/db?connect_timeout=5&application_name=app@corp",
	} {
		b, err := postgres.Open(ctxT(t), dsn, nil)
		if err == nil {
			_ = b.Close(context.Background())
			t.Fatalf("Open(%q) succeeded on port 1", dsn)
		}
		if errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("Open(%q): %v; want it read (unavailable: nothing listens on port 1), not refused", dsn, err)
		}
	}

	const head, tail = "correct", "horse-battery-staple"
	listen := "postgres://app:" + head + "@" + tail + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"
	b := openBackend(t, pgtest.MigratedDSN(t), &postgres.Config{ListenDSN: listen})
	_, _, err := b.Subscribe(ctxT(t), keysIn(pgtest.Namespace())("k"))
	if err == nil || !errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), "%40") || strings.Contains(err.Error(), tail) {
		t.Errorf("subscribe through a Config.ListenDSN whose password holds a bare '@': %v; want invalid, saying to write it as %%40, without the password", err)
	}
}
