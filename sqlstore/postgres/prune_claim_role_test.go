package postgres_test

import (
	"errors"
	"testing"
	"time"

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
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	serving := pgtest.GrantedRoleDSN(t, dsn, grantTablesNoDe, grantSeqUsage)
	conn := rawConn(t, serving)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Refused at the window, or at the claim: either way with 42501.
	var pe *pgconn.PgError
	if _, err := tx.Exec(ctx, `INSERT INTO leasestore_audit_prune (id, before) VALUES (1, '-infinity')`); errors.As(err, &pe) && pe.Code == "42501" {
		return
	} else if err != nil {
		t.Fatalf("the serving role's write of the prune window: %v; want insufficient_privilege (42501) or success", err)
	}
	var holder *string
	err = tx.QueryRow(ctx, `SELECT leasestore_audit_prune_claim('victim', 'mallory', 'mallory', now(), now())`).Scan(&holder)
	if errors.As(err, &pe) && pe.Code == "42501" {
		return
	}
	if err != nil {
		t.Fatalf("the serving role's call of leasestore_audit_prune_claim: %v; want insufficient_privilege (42501)", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	owner := openBackend(t, dsn, nil)
	_, perr := owner.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "victim"})
	t.Fatalf("a serving role (SELECT, INSERT, UPDATE on the tables: may not prune) opened the prune window itself and "+
		"took the request id \"victim\" (holder %s, committed); the owner's prune with that id then answered %v; "+
		"want the claim refused (42501)", deref(holder), perr)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
