package postgres

import (
	"context"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.Sweeper = (*Backend)(nil)

// maxSweep is the most rows one Sweep statement removes (and sets aside):
// twice it still fits the statement's SQL integer.
const maxSweep = 1 << 29

// Sweep sets aside up to max rows of ended leases (out of the live
// indexes, so that lists do not read them) and removes up to max rows of
// leases that ended more than grace ago, in one statement (see sweepSQL
// and [protocol.Sweeper]). A negative grace counts as 0, so a lease whose
// lock-delay still runs keeps its row, and the row keeps the key.
func (b *Backend) Sweep(ctx context.Context, max int, grace time.Duration) (protocol.SweepResult, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	var res protocol.SweepResult
	if err := b.callRefusal(protocol.OpSweep); err != nil {
		return res, err
	}
	if max <= 0 {
		return res, nil
	}
	if grace < 0 {
		grace = 0 // a negative one would remove rows whose lock-delay still runs
	}
	// The statement counts in SQL integers, up to twice max (see sweepSQL):
	// a larger max sweeps at most maxSweep rows of each kind in this call.
	max = min(max, maxSweep)
	err := retrySerialization(ctx, protocol.OpSweep, func() error {
		return b.interpret(ctx, protocol.OpSweep, b.pool.QueryRow(ctx, sweepSQL.sql,
			sweepSQL.bind(args{"now": b.clock(), "grace": interval(grace), "limit": max})...).Scan(&res.SetAside, &res.Removed))
	})
	return res, err
}
