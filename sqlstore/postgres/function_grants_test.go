package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// servingFunctionsGrant is the GRANT a permission error on any of the
// store's functions that serving and reading call names: all of them at
// once, as one GRANT on a table names every privilege of it.
const servingFunctionsGrant = "GRANT EXECUTE ON FUNCTION leasestore_outcome(text, text, text), " +
	"leasestore_outcome_fresh(text, text, text), leasestore_audit_went_back(), leasestore_audit_new_era(), " +
	"leasestore_audit_pruned_through(text), leasestore_audit_pruned_mark(text) TO it"

// A role with the grants docs/postgres-settings.md lists, but which may
// not execute one of the store's functions (a DBA revoked PUBLIC's
// EXECUTE, or the schema owner's default privileges keep new functions
// private), met "permission denied for function leasestore_outcome_fresh"
// and read only the generic "grant it those docs/postgres-settings.md
// lists": grantFor named a GRANT for the prune's claim functions alone,
// and Health, which refuses a role that lacks a privilege the writes
// need, let it pass. Each of the store's functions that serving and
// reading call is reached here as an operation reaches it, and the answer
// names the GRANT EXECUTE that gives it; Health names it for those every
// change statement calls.
func TestMissingExecuteOnAStoreFunctionNamesItsGrant(t *testing.T) {
	t.Parallel()
	wantGrant := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), servingFunctionsGrant) {
			t.Fatalf("%s: %v; want unavailable naming %q", what, err, servingFunctionsGrant)
		}
	}
	// setup makes a migrated schema and a role with the documented grants
	// that may not execute fn, and returns the schema's DSN and the role's.
	setup := func(t *testing.T, fn string) (dsn, roleDSN string) {
		t.Helper()
		dsn = pgtest.MigratedDSN(t)
		roleDSN = pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage, grantPruneFuncs)
		mustExec(t, rawConn(t, dsn), "REVOKE EXECUTE ON FUNCTION "+fn+" FROM PUBLIC")
		return dsn, roleDSN
	}
	// The server checks EXECUTE on every function a statement names when
	// the statement starts, not when it calls it: without EXECUTE on
	// leasestore_outcome_fresh, which a change statement calls only when
	// its write met a change committed after its snapshot, every change
	// statement fails, before it waits for its key (so no race is needed,
	// and none can reach the call); so it does without
	// leasestore_outcome, or leasestore_audit_went_back (called only when
	// the audit ids went back). Health refuses such a role first.
	for _, fn := range []string{"leasestore_outcome(text, text, text)", "leasestore_outcome_fresh(text, text, text)",
		"leasestore_audit_went_back()"} {
		t.Run(fn+", named by every change statement", func(t *testing.T) {
			t.Parallel()
			_, roleDSN := setup(t, fn)
			b := openBackend(t, roleDSN, &postgres.Config{NoCoalescing: true})
			wantGrant(t, "health", b.Health(ctxT(t)))
			_, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"})
			wantGrant(t, "acquire", err)
		})
	}
	t.Run("leasestore_audit_pruned_mark, read by an audit read from a cursor", func(t *testing.T) {
		t.Parallel()
		_, roleDSN := setup(t, "leasestore_audit_pruned_mark(text)")
		b := openBackend(t, roleDSN, nil)
		acquireKeys(t, b, key, 2, time.Minute)
		page, err := b.ReadAudit(ctxT(t), audit.Query{Namespace: "ns", Limit: 1})
		if err != nil || page.NextCursor == "" {
			t.Fatalf("first page: %+v, %v", page, err)
		}
		_, err = b.ReadAudit(ctxT(t), audit.Query{Namespace: "ns", Cursor: page.NextCursor})
		wantGrant(t, "audit read from a cursor", err)
	})
	t.Run("leasestore_audit_new_era, called by health when the ids went back", func(t *testing.T) {
		t.Parallel()
		dsn, roleDSN := setup(t, "leasestore_audit_new_era()")
		b := openBackend(t, roleDSN, nil)
		raw := rawConn(t, dsn)
		// As after a move to another cluster: the next transaction ids
		// map below the trail's newest record.
		mustExec(t, raw, "UPDATE leasestore_audit_era SET id_offset = 1000000000")
		acquireKeys(t, b, key, 1, time.Minute)
		mustExec(t, raw, "UPDATE leasestore_audit_era SET id_offset = 0")
		wantGrant(t, "health", b.Health(ctxT(t)))
	})
}
