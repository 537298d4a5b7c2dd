package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// bareBackend is a backend used directly whose signals are not used (as
// one that cannot signal, a PostgreSQL behind a transaction pooler, say):
// the renewals alone tell a loss.
type bareBackend struct{ protocol.Backend }

// A scheduler over a backend used directly (New takes any Store; the
// scheduler makes the request ids a backend does not) loses a revoked
// target at its next renewal: the backend answers the refused renewal
// not_found in its Result with a nil error (protocol.Backend's rule), and
// the scheduler must not take that for a renewal and keep the handler
// working with a token the store no longer honours.
func TestSchedulerOverABackendLosesARevokedTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.NewStore(nil)
	b, admin := st.Handle(), st.Handle()
	t.Cleanup(func() { _ = b.Close(ctx); _ = admin.Close(ctx) }) // after the scheduler stopped (start's cleanup)
	const ns = "bare"
	type end struct {
		token int64
		cause error
	}
	ended := make(chan end, 8)
	handler := func(ctx context.Context, _ string, token int64) {
		<-ctx.Done()
		ended <- end{token, context.Cause(ctx)}
	}
	a, err := scheduler.New(bareBackend{b}, "a", scheduler.Static("x1"), handler, &scheduler.Config{Namespace: ns, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, a)
	eventually(t, "a holds x1", holds(a, "x1"))
	token := a.Snapshot().Owned[0].Token
	res, err := admin.Revoke(ctx, protocol.RevokeRequest{Key: protocol.Key{Namespace: ns, Name: "x1"}, Actor: "op", Reason: "stuck",
		RequestID: "rev-1"})
	if err != nil || res.Status != protocol.StatusRevoked {
		t.Fatalf("revoke: %s, %v", res.Status, err)
	}
	select {
	case got := <-ended:
		if got.token != token {
			t.Errorf("the handler of token %d ended, want that of the revoked token %d", got.token, token)
		}
		// Heard at a renewal (not_found), not later by the local clock
		// after renewals taken for answerless ones.
		if !errors.Is(got.cause, protocol.ErrNotFound) {
			t.Errorf("the revoked target's handler ended with cause %q, want one matching ErrNotFound (the renewal's answer): "+
				"the renewals' not_found answers (nil error) were taken for renewals without an answer, and the lease "+
				"was given up only by the local clock", got.cause)
		}
	case <-time.After(3 * ttl):
		t.Errorf("x1 (token %d) was revoked %s ago (ttl %s, renewed every ttl/3) and the scheduler over a bare backend still works it "+
			"(owned %+v): the renewals' not_found answers (nil error) were taken for renewals", token, 3*ttl, ttl, a.Snapshot().Owned)
	}
}
