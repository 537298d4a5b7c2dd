package postgres

import (
	"context"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.Sweeper = (*Backend)(nil)

// Sweep removes up to max rows of leases that expired, or were released or
// revoked, more than grace ago, in one statement (see sweepSQL and
// [protocol.Sweeper]).
func (b *Backend) Sweep(ctx context.Context, max int, grace time.Duration) (int, error) {
	var n int
	err := retrySerialization(ctx, protocol.OpSweep, func() error {
		return interpretError(protocol.OpSweep, b.pool.QueryRow(ctx, sweepSQL.sql,
			sweepSQL.bind(args{"now": b.clock(), "grace": interval(grace), "limit": max})...).Scan(&n))
	})
	return n, err
}
