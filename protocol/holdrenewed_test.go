package protocol_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// renewSignal closes renewed when a renewal first succeeds; a store
// wrapper of the Hold tests embeds it.
type renewSignal struct {
	renewed chan struct{}
	once    atomic.Bool
}

func newRenewSignal() renewSignal { return renewSignal{renewed: make(chan struct{})} }

// noteRenew passes a renewal's answer through, noting a success.
func (s *renewSignal) noteRenew(res protocol.Result, err error) (protocol.Result, error) {
	if err == nil && s.once.CompareAndSwap(false, true) {
		close(s.renewed)
	}
	return res, err
}

// holdUntilRenewed holds a lease of ttl through b and waits until a
// renewal succeeds (s.renewed), failing with lost (and the cause) when the
// lease is lost first, or after it.
func holdUntilRenewed(t *testing.T, b protocol.Backend, s *renewSignal, ttl time.Duration, lost func() string) {
	t.Helper()
	ctx := context.Background()
	rt := protocol.New(b, nil)
	defer rt.Close(ctx)
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: ttl}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	select {
	case <-s.renewed:
	case <-h.Context().Done():
		t.Fatalf("%s: %v", lost(), context.Cause(h.Context()))
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("the lease renewed is lost: %v", context.Cause(h.Context()))
	}
}
