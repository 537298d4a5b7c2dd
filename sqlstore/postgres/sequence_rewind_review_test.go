package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// TestSequenceSetBackUnderARunningBackendKeepsSweptKeysFenced: a
// switchover to a logical replica (which carries no sequence state) under
// a running fleet sets the fencing sequence back while the backends keep
// serving: nothing calls Health between the switchover and the next
// acquire. DESIGN.md: every acquire issues a token greater than every
// token ever issued for the key, and a switchover is made harmless or
// refused. A key whose row the sweep removed has no row to take its floor
// from, so its next acquire draws the rewound sequence's value: a token
// the key already had (a fenced resource that saw the old holder's token
// accepts the new holder's smaller one as stale, or worse, accepts the
// old holder's writes).
func TestSequenceSetBackUnderARunningBackendKeepsSweptKeysFenced(t *testing.T) {
	t.Parallel()
	t.Skip("known defect, not fixed yet: a swept key has no row to floor its token, and the sequence is repaired only at " +
		"Open and Health; a fix needs a floor in the acquire statement and the batch function (a migration). " +
		"Remove this skip to see it fail.")
	dsn := pgtest.MigratedDSN(t)
	key := keysIn(pgtest.Namespace())
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	gone, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w", TTL: time.Hour, RequestID: "a-gone"})
	wantStatus(t, "acquire gone", gone, err, protocol.StatusAcquired)
	res, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("gone"), Owner: "w", Token: gone.Lease.Token,
		RequestID: "r-gone"})
	wantStatus(t, "release gone", res, err, protocol.StatusReleased)
	held, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Hour, RequestID: "a-held"})
	wantStatus(t, "acquire held", held, err, protocol.StatusAcquired)
	if _, err := b.Sweep(ctxT(t), 100, 0); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if n := count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE name = 'gone'"); n != 0 {
		t.Fatalf("precondition: the sweep left gone's row (%d rows)", n)
	}
	// The switchover, under the running backend: no Open, no Health.
	mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 1, false)")
	again, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w2", TTL: time.Hour,
		RequestID: "a-gone-again"})
	if err == nil && again.Status == protocol.StatusAcquired && again.Lease.Token <= gone.Lease.Token {
		t.Fatalf("the swept key got token %d after the sequence was set back; it had token %d before "+
			"(want a greater token, or a refusal naming the sequence)", again.Lease.Token, gone.Lease.Token)
	}
}
