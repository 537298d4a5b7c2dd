package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// RenewMany of more than a thousand leases sends a statement per thousand.
// When the deadline passes during a later statement, the renewals of the
// statements that committed were answered: protocol.BulkRenewer returns an
// error (and no results) only when it could answer none, and the answered
// renewals keep their outcomes (as etcd's and the HTTP client's do), the
// others failing alone in their results. Here the second statement's
// second renewal is held up by a trigger (added after Open) until the
// deadline has passed.
func TestRenewManyKeepsTheAnswersOfCommittedStatements(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	k := keysIn(ns)
	b := openBackend(t, dsn, nil)
	const n = 1002
	acquireKeys(t, b, k, n, time.Hour)
	admin := rawConn(t, dsn)
	mustExec(t, admin, `
CREATE FUNCTION test_slow_renew() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_sleep(30);
	RETURN NEW;
END $$;
CREATE TRIGGER test_slow_renew BEFORE UPDATE ON leasestore_leases FOR EACH ROW
	WHEN (NEW.name = 'k1001') EXECUTE FUNCTION test_slow_renew();`)
	reqs := make([]protocol.RenewRequest, n)
	for i := range reqs {
		got, err := b.Get(ctxT(t), protocol.GetRequest{Key: k(fmt.Sprintf("k%d", i))})
		wantStatus(t, "get", got, err, protocol.StatusFound)
		reqs[i] = protocol.RenewRequest{Key: got.Lease.Key, Owner: "w", Token: got.Lease.Token, TTL: time.Hour,
			RequestID: fmt.Sprintf("r%d", i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	results, err := b.RenewMany(ctx, reqs)
	committed := count(t, admin, `SELECT count(*) FROM leasestore_audit WHERE namespace = $1 AND op = 'renew'`, ns)
	if committed < 1000 {
		t.Fatalf("%d renewals committed, want the first statement's 1000: the case was not exercised (renew many: %v)", committed, err)
	}
	if err != nil {
		t.Fatalf("renew many: %v (status %s) and no results, though its first statement committed %d renewals",
			err, protocol.StatusOf(err), committed)
	}
	for i, r := range results[:1000] {
		if r.Status != protocol.StatusRenewed {
			t.Fatalf("renewal %d: %s (%s), want renewed: its statement committed", i, r.Status, r.Message)
		}
	}
}
