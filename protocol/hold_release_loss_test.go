package protocol_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// countedReleases is a memstore that counts the releases it gets and
// still signals (it keeps memstore's Subscribe).
type countedReleases struct {
	*memstore.Backend
	releases atomic.Int64
}

func (b *countedReleases) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	b.releases.Add(1)
	return b.Backend.Release(ctx, req)
}

// A loss heard while Release runs (after it found the lease not yet lost,
// before the renewals stopped) is answered as a loss: Release answers
// ErrLeaseLost with the reason, now and when called again, and sends no
// release. Before, Release went on to release and answered the
// release's not_found.
func TestHoldReleaseAnswersALossHeardDuringIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		quiet bool // the store does not signal: the refused renewal tells the loss
	}{{"signalled", false}, {"refused renewal", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &countedReleases{Backend: memstore.New(nil)}
			rt := protocol.New(b, nil)
			defer rt.Close(context.Background())
			var s protocol.Store = rt
			cfg := &protocol.HoldConfig{} // renewals every 20s: the signal tells the loss
			if tc.quiet {
				s, cfg.RenewEvery = quietStore{rt}, 10*time.Millisecond
			}
			k := holdKey(t)
			h, err := protocol.Hold(t.Context(), s, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			protocol.SetReleaseHook(h, func() {
				if _, err := rt.Revoke(t.Context(), protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck"}); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-h.Context().Done():
				case <-time.After(30 * time.Second):
					t.Error("the revoke was not heard")
				}
			})
			for range 2 {
				if err := h.Release(t.Context()); !errors.Is(err, protocol.ErrLeaseLost) || !errors.Is(err, protocol.ErrNotFound) {
					t.Fatalf("Release = %v, want the loss (ErrLeaseLost, not_found)", err)
				}
			}
			if n := b.releases.Load(); n != 0 {
				t.Fatalf("Release sent %d releases of a revoked lease, want none", n)
			}
		})
	}
}
