package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A connection the server refuses because a limit of connections is
// reached (SQLSTATE 53300: here the role's CONNECTION LIMIT; the server's
// max_connections and a database's CONNECTION LIMIT answer the same code)
// must say so and name the limits to raise, not only "the server refused
// or dropped the connection", which sends the operator after the network
// and the server's health.
func TestConnectionLimitIsNamed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	roleDSN := pgtest.RoleDSN(t, dsn)
	u, err := url.Parse(roleDSN)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, rawConn(t, dsn), "ALTER ROLE "+pgx.Identifier{u.User.Username()}.Sanitize()+" CONNECTION LIMIT 1")
	rawConn(t, roleDSN) // the role's one connection
	b, err := postgres.Open(ctxT(t), roleDSN, nil)
	if err == nil {
		_ = b.Close(context.Background())
		t.Fatal("Open succeeded past the role's connection limit")
	}
	t.Logf("Open past the role's connection limit: %v", err)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Fatalf("the error carries no SQLSTATE 53300: the test did not reach the limit: %v", err)
	}
	if st := protocol.StatusOf(err); st != protocol.StatusUnavailable {
		t.Errorf("status %q, want unavailable", st)
	}
	msg := err.Error()
	if strings.Contains(msg, "refused or dropped the connection") {
		t.Errorf("the error %q takes a limit of connections for a refused or dropped connection", msg)
	}
	for _, fix := range []string{"max_connections", "CONNECTION LIMIT"} {
		if !strings.Contains(msg, fix) {
			t.Errorf("the error %q does not name %s, a limit to raise", msg, fix)
		}
	}
}
