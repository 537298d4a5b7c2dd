package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// wantCredentialRefusal fails the test unless err is unavailable matching want (one
// of protocol.ErrUnauthenticated and protocol.ErrForbidden) and not the
// other, its text naming each of names.
func wantCredentialRefusal(t *testing.T, what string, err, want error, names ...string) {
	t.Helper()
	other := protocol.ErrForbidden
	if want == protocol.ErrForbidden {
		other = protocol.ErrUnauthenticated
	}
	if !errors.Is(err, protocol.ErrUnavailable) || !errors.Is(err, want) || errors.Is(err, other) {
		t.Fatalf("%s: %v; want unavailable matching %v (a refusal no retry mends, not an outage)", what, err, want)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("%s: %v; want it to name %q", what, err, n)
		}
	}
}

// A role the server does not know (SQLSTATE 28000 at connection) is a
// refusal of the DSN's credentials, not an outage: Open's error, and
// ConnectionError's (leasectl migrate's), match ErrUnauthenticated,
// naming the DSN's role and password.
func TestUnknownRoleIsUnauthenticated(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.MigratedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(fmt.Sprintf("lstest_nobody_%d", time.Now().UnixNano()))
	_, err = postgres.Open(ctxT(t), u.String(), nil)
	wantCredentialRefusal(t, "open as a role that does not exist", err, protocol.ErrUnauthenticated, "role and password")
	_, err = pgx.Connect(ctxT(t), u.String())
	wantCredentialRefusal(t, "ConnectionError of a role that does not exist", postgres.ConnectionError(err), protocol.ErrUnauthenticated, "role and password")
}

// A role the server lets in without the privileges the store's objects
// need (SQLSTATE 42501, permission denied; or no USAGE on the schema) is
// refused for its permission, not by an outage: the errors match
// ErrForbidden and name the GRANT, in Open, Health and a write.
func TestRoleWithoutPrivilegesIsForbidden(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	reader := pgtest.GrantedRoleDSN(t, dsn, "SELECT ON ALL TABLES IN SCHEMA %s")
	b := openBackend(t, reader, nil)
	_, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantCredentialRefusal(t, "acquire by a role that may only read", err, protocol.ErrForbidden, "GRANT")
	wantCredentialRefusal(t, "health of a role that may only read", b.Health(ctxT(t)), protocol.ErrForbidden, "GRANT")

	noUsage := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage)
	mustExec(t, rawConn(t, dsn), "REVOKE USAGE ON SCHEMA "+pgx.Identifier{schemaOf(t, dsn)}.Sanitize()+" FROM "+roleName(t, noUsage))
	_, err = postgres.Open(ctxT(t), noUsage, nil)
	wantCredentialRefusal(t, "open by a role without USAGE on the schema", err, protocol.ErrForbidden, "GRANT USAGE ON SCHEMA")
}

// A wrong password (SQLSTATE 28P01, password authentication failed) is a
// refusal of the DSN's credentials: Open's error matches
// ErrUnauthenticated, naming the DSN's role and password, and holds no
// password. The project's PostgreSQL trusts every local connection, so
// this runs on a throwaway cluster of its own (chaos_test.go's) that asks
// for passwords (scram-sha-256).
func TestWrongPasswordIsUnauthenticated(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("pg_config"); err != nil && os.Getenv("CI") == "" {
		t.Skip("needs PostgreSQL's server programs (pg_config, initdb, pg_ctl) for a cluster that asks for passwords")
	}
	c := newCluster(t)
	mustExec(t, rawConn(t, c.dsn()), "CREATE ROLE lstest_pw LOGIN PASSWORD 'right-Passw0rd'")
	// Only the cluster's superuser, the test's, keeps trust.
	hba := "local all all trust\nhost all leasestore 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(c.data, "pg_hba.conf"), []byte(hba), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExec(t, rawConn(t, c.dsn()), "SELECT pg_reload_conf()")
	dsn := "postgres://lstest_pw:%s@127.0.0.1:" + c.port + "/postgres?sslmode=disable"
	// The store itself does not matter: the server refuses first. With
	// the right password the role gets in (and finds no store).
	_, err := postgres.Open(ctxT(t), fmt.Sprintf(dsn, "right-Passw0rd"), nil)
	if errors.Is(err, protocol.ErrUnauthenticated) || errors.Is(err, protocol.ErrForbidden) {
		t.Fatalf("open with the right password: %v; want it let in (a store to migrate, not a refusal)", err)
	}
	_, err = postgres.Open(ctxT(t), fmt.Sprintf(dsn, "wr0ng-Passw0rd"), nil)
	wantCredentialRefusal(t, "open with a wrong password", err, protocol.ErrUnauthenticated, "role and password", "28P01")
	if strings.Contains(err.Error(), "wr0ng-Passw0rd") {
		t.Fatalf("open with a wrong password: %v; holds the password", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err = pgx.Connect(ctx, fmt.Sprintf(dsn, "wr0ng-Passw0rd"))
	wantCredentialRefusal(t, "ConnectionError of a wrong password", postgres.ConnectionError(err), protocol.ErrUnauthenticated, "role and password")
}
