package protocol_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// losesFirstRenewAnswer lets its first renewal take effect and answers it
// timeout (the answer lost on the way back); it notes every renewal's
// request id and whether the store answered it as a replay.
type losesFirstRenewAnswer struct {
	protocol.Backend
	mu       sync.Mutex
	ids      []string
	replayed []bool
}

func (b *losesFirstRenewAnswer) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := b.Backend.Renew(ctx, req)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ids = append(b.ids, req.RequestID)
	b.replayed = append(b.replayed, res.Replayed)
	if len(b.ids) == 1 && err == nil {
		return protocol.Result{Status: protocol.StatusTimeout}, &protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout,
			Key: req.Key, Message: "the answer was lost"}
	}
	return res, err
}

// Hold's renewals each carry a request id of their own; a renewal whose
// outcome is unknown is sent again under its id, so the store answers what
// the first send did (a replay), and the next renewal has a new id.
func TestHoldRetriesARenewalUnderItsIDAndRenewsNextUnderANewOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &losesFirstRenewAnswer{Backend: memstore.New(nil)}
	key := protocol.Key{Namespace: "ns", Name: "k"}
	h, err := protocol.Hold(ctx, b, protocol.AcquireRequest{Key: key, Owner: "w", TTL: 600 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	time.Sleep(700 * time.Millisecond) // three or four renewals
	if err := h.Context().Err(); err != nil {
		t.Fatalf("the lease was lost: %v", context.Cause(h.Context()))
	}
	b.mu.Lock()
	ids, replayed := append([]string(nil), b.ids...), append([]bool(nil), b.replayed...)
	b.mu.Unlock()
	if len(ids) < 3 {
		t.Fatalf("%d renewals in 700ms with a TTL of 600ms, want at least 3", len(ids))
	}
	if ids[0] == "" || ids[1] != ids[0] || !replayed[1] {
		t.Errorf("renewal ids %q (replayed %v): want the first non-empty and retried under the same id, answered as a replay", ids, replayed)
	}
	for i := 2; i < len(ids); i++ {
		if ids[i] == "" || ids[i] == ids[i-1] || replayed[i] {
			t.Errorf("renewal %d: id %q after %q (replayed %v): want a new id after a known outcome", i, ids[i], ids[i-1], replayed[i])
		}
	}
}
