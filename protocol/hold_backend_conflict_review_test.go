package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// Hold over a backend used directly (docs/holding.md: "the backend a Hold
// was given") on a key someone else holds returns the conflict (an error
// matching ErrConflict), as it does over a Runtime. A backend answers the
// conflict in its Result with a nil error (protocol.Backend's rule),
// carrying the holder's lease: Hold must not take that for an acquire and
// hand back a Held with the other holder's fencing token.
func TestHoldOverABackendOfAHeldKeyIsAConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.NewStore(nil)
	b, other := st.Handle(), st.Handle()
	defer b.Close(ctx)
	defer other.Close(ctx)
	k := holdKey(t)
	res, err := other.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Hour, RequestID: "acq-w1"})
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("acquire by w1: %s, %v", res.Status, err)
	}
	h, err := protocol.Hold(ctx, b, protocol.AcquireRequest{Key: k, Owner: "w2", TTL: time.Hour, RequestID: "acq-w2"}, nil)
	if h != nil {
		defer h.Release(ctx)
		t.Fatalf("Hold by w2 over a bare backend of a key w1 holds returned a Held (error %v) with token %d, owner %s: "+
			"the conflict (nil error, the holder's lease) was taken for an acquire; want an error matching ErrConflict",
			err, h.Token(), h.Lease().Owner)
	}
	if !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("Hold by w2 of a key w1 holds: %v, want an error matching ErrConflict", err)
	}
}
