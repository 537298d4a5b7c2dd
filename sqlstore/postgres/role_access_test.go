package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// DESIGN.md and docs/postgres-settings.md: Health refuses a role that
// lacks a privilege the writes need, naming the GRANT; Open accepts it,
// and reads serve. A role without USAGE on leasestore_fencing_seq (which
// acquire's nextval needs) could not even open: Open read the sequence's
// state with pg_sequence_last_value, which needs it, and failed naming
// the GRANT, so a role that may only read the tables (a dashboard, an
// auditor) could read nothing. Open accepts both roles here and their
// reads answer; Health and an acquire name the GRANT.
func TestRoleWithoutTheSequenceOpensAndReads(t *testing.T) {
	t.Parallel()
	const grant = "GRANT USAGE, UPDATE ON SEQUENCE leasestore_fencing_seq TO it"
	for name, grants := range map[string][]string{
		"a role granted the tables":            {grantTables},
		"a role that may only read the tables": {"SELECT ON ALL TABLES IN SCHEMA %s"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			owner := openBackend(t, dsn, nil)
			acquireKeys(t, owner, key, 2, time.Hour)
			b, err := postgres.Open(ctxT(t), pgtest.GrantedRoleDSN(t, dsn, grants...), nil)
			if err != nil {
				t.Fatalf("open: %v; want it to accept the role, whose reads serve", err)
			}
			t.Cleanup(func() { _ = b.Close(ctxT(t)) })
			res, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("k0"), RequestID: "g"})
			wantStatus(t, "get", res, err, protocol.StatusFound)
			if l, err := b.List(ctxT(t), protocol.ListRequest{Namespace: "ns", RequestID: "l"}); err != nil || len(l.Leases) != 2 {
				t.Fatalf("list: %+v, %v; want 2 leases", l, err)
			}
			if p, err := b.ReadAudit(ctxT(t), audit.Query{Namespace: "ns"}); err != nil || len(p.Records) != 2 {
				t.Fatalf("audit: %+v, %v; want 2 records", p, err)
			}
			if err := b.Health(ctxT(t)); !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), grant) {
				t.Fatalf("health: %v; want unavailable naming %q", err, grant)
			}
			_, err = b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k9"), Owner: "o", TTL: time.Minute, RequestID: "a9"})
			if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "GRANT") {
				t.Fatalf("acquire: %v; want unavailable naming a GRANT", err)
			}
		})
	}
}

// A role that may not use the schema its search_path names (USAGE never
// granted, or revoked while the service runs) sees none of the store's
// objects: Open told it that no schema of the search_path exists and to
// run `leasectl migrate up`, which would not help (the schema exists, and
// migrating as that role fails, or, with public next in the search_path,
// makes a second store there). Open and Health name the GRANT instead.
func TestRoleWithoutUsageOnTheSchemaIsToldTheGrant(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	roleDSN := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage)
	grant := "GRANT USAGE ON SCHEMA " + pgx.Identifier{schemaOf(t, dsn)}.Sanitize() + " TO it"
	wantGrant := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), grant) ||
			strings.Contains(err.Error(), "migrate up") {
			t.Fatalf("%s: %v; want unavailable naming %q, not migrate up", what, err, grant)
		}
	}
	b := openBackend(t, roleDSN, nil)
	mustExec(t, rawConn(t, dsn), "REVOKE USAGE ON SCHEMA "+schemaOf(t, dsn)+" FROM "+roleName(t, roleDSN))
	wantGrant("health", b.Health(ctxT(t)))
	_, err := postgres.Open(ctxT(t), roleDSN, nil)
	wantGrant("open", err)
	// With public after it in the search_path, the connection uses public,
	// where there is no store: migrating would make one there.
	schema := schemaOf(t, dsn)
	withPublic := strings.Replace(roleDSN, "search_path%3D"+schema, "search_path%3D"+schema+"%2Cpublic", 1)
	if withPublic == roleDSN {
		t.Fatalf("no search_path=%s in %s", schema, roleDSN)
	}
	_, err = postgres.Open(ctxT(t), withPublic, nil)
	wantGrant("open with public next in the search_path", err)
}
