package memstore

import (
	"context"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.Sweeper = (*Backend)(nil)

// Sweep removes up to max leases that expired more than grace ago by the
// store's clock (see [protocol.Sweeper]); one counter issues every token,
// so a key acquired afterwards still gets a greater one.
func (b *Backend) Sweep(ctx context.Context, max int, grace time.Duration) (protocol.SweepResult, error) {
	if max <= 0 {
		return protocol.SweepResult{}, nil
	}
	if grace < 0 {
		grace = 0
	}
	s, now, err := b.lock(ctx, protocol.OpSweep)
	if err != nil {
		return protocol.SweepResult{}, err
	}
	defer s.mu.Unlock()
	n := 0
	for k, l := range s.leases {
		if n == max {
			break
		}
		if l.FreeAt().Before(now.Add(-grace)) { // its lock-delay, if any, passed too
			delete(s.leases, k)
			n++
		}
	}
	for k, l := range s.delayed {
		if !now.Before(l.FreeAt()) {
			delete(s.delayed, k)
		}
	}
	return protocol.SweepResult{Removed: n}, nil
}
