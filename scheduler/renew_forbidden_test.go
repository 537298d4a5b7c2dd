package scheduler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// forbiddenRenewals is a store that, once refuse is set, refuses every
// renewal of the target t as a store refuses a role without the
// privilege (an unavailable error matching protocol.ErrForbidden), and
// counts them.
type forbiddenRenewals struct {
	protocol.Store
	refuse  atomic.Bool
	refused atomic.Int64
}

func (s *forbiddenRenewals) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if s.refuse.Load() && req.Key.Namespace == scheduler.DefaultNamespace && req.Key.Name == "t" {
		s.refused.Add(1)
		return protocol.Result{Status: protocol.StatusUnavailable}, &protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusUnavailable,
			Err: backendkit.Forbidden(errors.New("permission denied for table leasestore_leases")), Message: "the role may not renew"}
	}
	return s.Store.Renew(ctx, req)
}

// A renewal refused for the credentials' permission is a refusal, as
// protocol.Hold takes it, not an outage to retry until the lease's local
// deadline: the handler is cancelled with that refusal as its cause, and
// the store is not asked again and again.
func TestForbiddenRenewalCancelsTheHandlerWithItsRefusal(t *testing.T) {
	t.Parallel()
	store := &forbiddenRenewals{Store: newStore(t)}
	ctx := holdingT(t, store, &scheduler.Config{TTL: ttl})
	store.refuse.Store(true)
	<-ctx.Done()
	if cause := context.Cause(ctx); !errors.Is(cause, protocol.ErrForbidden) {
		t.Errorf("t's handler was cancelled with cause %v after %d refused renewals; want the renewal's refusal (matching protocol.ErrForbidden), not a retry until the lease's local deadline",
			cause, store.refused.Load())
	}
}
