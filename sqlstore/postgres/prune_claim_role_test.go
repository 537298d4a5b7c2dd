package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// A role granted what serving needs (SELECT, INSERT, UPDATE on the
// tables, docs/postgres-settings.md), and so not what pruning needs
// (DELETE on the trail and on leasestore_audit_prune), must not take a
// prune's request id through leasestore_audit_prune_claim: the docs say
// only a role that may prune can open the window those functions ask
// for. A serving role can INSERT the window's row itself; if the claim
// then goes through and commits, a prune with that id is refused as used.
func TestServingRoleCannotClaimAPruneRequestID(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	serving := pgtest.GrantedRoleDSN(t, dsn, grantTablesNoDe, grantSeqUsage)
	tryToTakeAPruneRequestID(t, rawConn(t, serving), dsn, "opened the prune window itself")
}

// tryToTakeAPruneRequestID opens the prune window and claims the request
// id "victim" on conn, a role that may not prune, and commits; it fails
// the test, naming how the role got there, unless the window's write or
// the claim was refused with insufficient_privilege (42501). A claim that
// went through is shown by the owner's prune of that id (through dsn)
// refused as used.
func tryToTakeAPruneRequestID(t *testing.T, conn *pgx.Conn, dsn, how string) {
	t.Helper()
	ctx := ctxT(t)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var pe *pgconn.PgError
	if _, err := tx.Exec(ctx, `INSERT INTO leasestore_audit_prune (id, before) VALUES (1, '-infinity')`); errors.As(err, &pe) && pe.Code == "42501" {
		return
	} else if err != nil {
		t.Fatalf("the role's write of the prune window: %v; want insufficient_privilege (42501) or success", err)
	}
	var holder *string
	err = tx.QueryRow(ctx, `SELECT leasestore_audit_prune_claim('victim', 'mallory', 'mallory', now(), now())`).Scan(&holder)
	if errors.As(err, &pe) && pe.Code == "42501" {
		return
	}
	if err != nil {
		t.Fatalf("the role's call of leasestore_audit_prune_claim: %v; want insufficient_privilege (42501)", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	owner := openBackend(t, dsn, nil)
	_, perr := owner.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "victim"})
	t.Fatalf("a serving role (SELECT, INSERT, UPDATE on the tables: may not prune) %s and took the request id \"victim\" "+
		"(holder %s, committed); the owner's prune with that id then answered %v; want it refused (42501)", how, deref(holder), perr)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
