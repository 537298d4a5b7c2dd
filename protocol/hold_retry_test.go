package protocol_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// hangsOnce answers its first renewal only when the renewal's context
// ends, as timeout (the renewal an etcd member takes while the cluster
// elects a new leader, held until the deadline), and the later ones as the
// store does.
type hangsOnce struct {
	protocol.Backend
	renewSignal
	renews atomic.Int64
}

func (b *hangsOnce) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if b.renews.Add(1) == 1 {
		<-ctx.Done()
		return protocol.Result{}, &protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout, Message: "the deadline passed", Err: ctx.Err()}
	}
	return b.noteRenew(b.Backend.Renew(ctx, req))
}

// A renewal that hangs for its whole timeout is retried while the lease
// has time left. With the defaults (a renewal every third of the TTL,
// each bounded by that) the first renewal hanging left a third of the
// TTL, and the Held gave the lease up at once instead of renewing it:
// `leasectl run` over etcd exited 6 after one leader was killed, the
// cluster answering again within a second.
func TestHoldRetriesAHungRenewalWhileTheLeaseHasTimeLeft(t *testing.T) {
	t.Parallel()
	b := &hangsOnce{Backend: memstore.New(nil), renewSignal: newRenewSignal()}
	holdUntilRenewed(t, b, &b.renewSignal, 1500*time.Millisecond, func() string {
		return fmt.Sprintf("lost after %d renewal(s), the first hanging for its timeout with a third of the TTL left", b.renews.Load())
	})
}
