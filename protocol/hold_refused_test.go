package protocol_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// refusedCause is a backend's refusal of its credentials (want
// ErrUnauthenticated) or their permission (ErrForbidden), as
// backendkit.Unauthenticated and Forbidden mark one.
type refusedCause struct{ sentinel error }

func (c refusedCause) Error() string        { return "the store refused the credentials" }
func (c refusedCause) Is(target error) bool { return target == c.sentinel }
func refused(op protocol.Op, sentinel error) error {
	return &protocol.Error{Op: op, Status: protocol.StatusUnavailable, Message: "test: refused", Err: refusedCause{sentinel}}
}

// refusingStore refuses acquires (acquire set) or renewals (renew set)
// for the credentials' permission, counting the renewals it refused.
type refusingStore struct {
	protocol.Backend
	acquire, renew atomic.Bool
	refusedRenews  atomic.Int64
}

func (b *refusingStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	if b.acquire.Load() {
		return protocol.Result{}, refused(protocol.OpAcquire, protocol.ErrUnauthenticated)
	}
	return b.Backend.Acquire(ctx, req)
}

func (b *refusingStore) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if b.renew.Load() {
		b.refusedRenews.Add(1)
		return protocol.Result{}, refused(protocol.OpRenew, protocol.ErrForbidden)
	}
	return b.Backend.Renew(ctx, req)
}

// A renewal refused for the credentials' permission (ErrForbidden: a
// role whose grant was revoked, a bearer token withdrawn) is refused
// again however often it is sent: the Held loses the lease at once,
// its cause matching ErrLeaseLost and ErrForbidden, rather than retry it
// as for an outage until the lease runs out by the local clock.
func TestHoldLosesTheLeaseAtARefusedRenewal(t *testing.T) {
	t.Parallel()
	b := &refusingStore{Backend: memstore.New(nil)}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	h, err := protocol.Hold(context.Background(), rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: 30 * time.Second},
		&protocol.HoldConfig{RenewEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	b.renew.Store(true)
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the Held kept the lease 10s after its renewals were refused (%d refused): it retries them as for an outage",
			b.refusedRenews.Load())
	}
	cause := context.Cause(h.Context())
	if !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrForbidden) || b.refusedRenews.Load() != 1 {
		t.Fatalf("cause %v after %d refused renewals, want lost matching ErrForbidden after one", cause, b.refusedRenews.Load())
	}
}

// An acquire refused for the credentials is refused again: Hold's error
// matches ErrUnauthenticated and does not tell the caller to call Hold
// again to learn the outcome (there is none to learn: nothing was taken).
func TestHoldRefusedAcquireIsNotToBeRetried(t *testing.T) {
	t.Parallel()
	b := &refusingStore{Backend: memstore.New(nil)}
	b.acquire.Store(true)
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	_, err := protocol.Hold(context.Background(), rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: time.Minute}, nil)
	if !errors.Is(err, protocol.ErrUnauthenticated) || strings.Contains(err.Error(), "call Hold again") {
		t.Fatalf("Hold refused for its credentials: %v, want an error matching ErrUnauthenticated that does not ask to call Hold again", err)
	}
}
