package cli

import (
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// A DSN naming a database that does not exist, or a role the server does
// not let in, is refused when connecting: the message says so and names
// the fix. It said "the server refused the statement". A database that
// does not exist is unavailable (exit 5, as before); a role the server
// does not let in is a refusal of the DSN's credentials, not an outage:
// exit 7, as for a served store's 401 (DESIGN.md).
func TestPostgresRefusedConnectionNamesTheFix(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.ServerDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB, noRole := *u, *u
	noDB.Path = "/leasestore_no_such_database"
	noRole.User = url.User("leasestore_no_such_role")
	code := map[string]int{noDB.String(): ExitUnavailable, noRole.String(): ExitAuth}
	for dsn, want := range map[string][]string{
		noDB.String():   {"refused the connection", "database", "create"},
		noRole.String(): {"refused the connection", "role", "pg_hba"},
	} {
		for _, args := range [][]string{{"get", "k"}, {"migrate", "status"}, {"migrate", "up"}} {
			o := runCLI(t, env{}, append(args, "--dsn", dsn)...)
			wantCode(t, o, code[dsn])
			for _, w := range want {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("%s --dsn %s: stderr %q lacks %q", strings.Join(args, " "), dsn, o.stderr, w)
				}
			}
			if strings.Contains(o.stderr, "refused the statement") {
				t.Errorf("%s --dsn %s: stderr %q calls a refused connection a refused statement", strings.Join(args, " "), dsn, o.stderr)
			}
		}
	}
}

// A DSN whose host and port nothing answers at (no server running there,
// a wrong port, a host that does not resolve) is refused naming what to
// check (exit 5). It said "postgres: cannot connect" and the driver's
// words only.
func TestPostgresUnreachableNamesTheFix(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	l.Close()
	for _, dsn := range []string{
		"postgres://root@" + free + "/test?sslmode=disable",
		"postgres://root@leasestore-no-such-host.invalid:5432/test?sslmode=disable",
	} {
		for _, args := range [][]string{{"get", "k"}, {"migrate", "status"}} {
			o := runCLI(t, env{}, append(args, "--dsn", dsn, "--timeout", "3s")...)
			wantCode(t, o, ExitUnavailable)
			for _, w := range []string{"host and port", "server"} {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("%s --dsn %s: stderr %q lacks %q", strings.Join(args, " "), dsn, o.stderr, w)
				}
			}
		}
	}
}
