package scheduler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// slowMembershipRenew is a store that cannot signal (no Notifier) and
// whose renewals of the membership lease, once hold is set, wait until
// their context ends; it tells when one started and whether the target's
// handler was cancelled by the time it ended.
type slowMembershipRenew struct {
	protocol.Store
	hold    chan struct{} // closed: hold the membership's renewals
	started chan struct{} // one per held renewal
	ended   chan error    // per held renewal: the cause of the handler's context by then
	cause   func() error
}

func (s *slowMembershipRenew) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	select {
	case <-s.hold:
		if req.Key.Namespace == "scheduler"+scheduler.WorkersSuffix {
			select {
			case s.started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			select {
			case s.ended <- s.cause():
			default: // the test has its answer
			}
		}
	default:
	}
	return s.Store.Renew(ctx, req)
}

// A renewal the store refuses cancels that handler at once (docs/scheduler.md:
// "A renewal the store refuses ... cancels that handler at once"), not when
// the slowest renewal of the round has returned: on a store that cannot
// signal the revoke, t's renewal answers not_found while the membership's
// renewal of the same round waits, and t's handler must be cancelled with
// that not_found before the slow renewal ends (which it may do as late as
// the leases' local deadline, when t would be lost by the clock anyway).
func TestRefusedRenewalIsNotHeldUpByASlowRenewal(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	handlerCtx := make(chan context.Context, 1)
	store := &slowMembershipRenew{Store: rt, hold: make(chan struct{}), started: make(chan struct{}, 10), ended: make(chan error, 10)}
	store.cause = func() error {
		ctx := <-handlerCtx
		handlerCtx <- ctx
		return context.Cause(ctx)
	}
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		handlerCtx <- ctx
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	if _, err := rt.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	close(store.hold)
	<-store.started
	if cause := <-store.ended; !errors.Is(cause, protocol.ErrNotFound) {
		t.Errorf("when the membership's slow renewal ended, the revoked t's handler had cause %v; want it cancelled by its renewal's not_found, which came first", cause)
	}
}
