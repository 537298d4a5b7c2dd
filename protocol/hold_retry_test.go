package protocol_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// hangsOnce answers its first renewal only when the renewal's context
// ends, as timeout (the renewal an etcd member takes while the cluster
// elects a new leader, held until the deadline), and the later ones as the
// store does; renewed is closed when one of those succeeds.
type hangsOnce struct {
	protocol.Backend
	renews  atomic.Int64
	renewed chan struct{}
	once    atomic.Bool
}

func (b *hangsOnce) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if b.renews.Add(1) == 1 {
		<-ctx.Done()
		return protocol.Result{}, &protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout, Message: "the deadline passed", Err: ctx.Err()}
	}
	res, err := b.Backend.Renew(ctx, req)
	if err == nil && b.once.CompareAndSwap(false, true) {
		close(b.renewed)
	}
	return res, err
}

// A renewal that hangs for its whole timeout is retried while the lease
// has time left. With the defaults (a renewal every third of the TTL,
// each bounded by that) the first renewal hanging left a third of the
// TTL, and the Held gave the lease up at once instead of renewing it:
// `leasectl run` over etcd exited 6 after one leader was killed, the
// cluster answering again within a second.
func TestHoldRetriesAHungRenewalWhileTheLeaseHasTimeLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &hangsOnce{Backend: memstore.New(nil), renewed: make(chan struct{})}
	rt := protocol.New(b, nil)
	defer rt.Close(ctx)
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: 1500 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	select {
	case <-b.renewed:
	case <-h.Context().Done():
		t.Fatalf("lost after %d renewal(s), the first hanging for its timeout with a third of the TTL left: %v",
			b.renews.Load(), context.Cause(h.Context()))
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("the lease renewed after the hung renewal is lost: %v", context.Cause(h.Context()))
	}
}
