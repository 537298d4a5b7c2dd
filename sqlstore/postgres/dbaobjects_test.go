package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// What a DBA may do to the store's tables and sequence beyond the settings
// and triggers of rolesettings_test.go and dbachanges_test.go: each is
// made harmless or refused by Open and Health, naming the fix.

// wantRefused fails unless err is unavailable and names fix.
func wantRefused(t *testing.T, what string, err error, fix string) {
	t.Helper()
	if err == nil || !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), fix) {
		t.Fatalf("%s: %v; want unavailable naming %q", what, err, fix)
	}
}

// A change's audit record takes its id from leasestore_audit_era's one
// row. A session that cannot see that row (row-level security enabled on
// the table for a role that does not own it, a DBA's common baseline, or
// the row deleted) must not change a lease without its record: the change
// and its record are one atomic step, and a request id's retry is answered
// from the record. The acquire answered acquired and left no record, and
// its retry after the release acquired the key again with a new token.
func TestChangesAreNeverCommittedWithoutTheirRecord(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, ddl string }{
		{"row-level security on the era table", "ALTER TABLE leasestore_audit_era ENABLE ROW LEVEL SECURITY"},
		{"the era's row deleted", "DELETE FROM leasestore_audit_era"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage), &postgres.Config{NoCoalescing: true})
			owner := rawConn(t, dsn)
			mustExec(t, owner, c.ddl)
			healthErr := b.Health(ctxT(t))
			req := protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"}
			res, err := b.Acquire(ctxT(t), req)
			if err != nil {
				// Refused: nothing may have changed.
				if n := count(t, owner, "SELECT count(*) FROM leasestore_leases"); n != 0 {
					t.Fatalf("the refused acquire (%v) left %d rows", err, n)
				}
				return
			}
			wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			if n := count(t, owner, "SELECT count(*) FROM leasestore_audit WHERE request_id = 'a1'"); n != 1 {
				rel, rerr := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token, RequestID: "r1"})
				again, aerr := b.Acquire(ctxT(t), req)
				t.Fatalf("the acquire answered acquired (token %d) and the trail holds %d records of it (health: %v); "+
					"after a release (%s, %v) its retry answered %s token %d replayed=%v (%v)",
					res.Lease.Token, n, healthErr, rel.Status, rerr, again.Status, again.Lease.Token, again.Replayed, aerr)
			}
		})
	}
}
