package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.Sweeper = (*Backend)(nil)

// Sweep removes up to max rows of leases that expired more than grace ago,
// in one write transaction (see [protocol.Sweeper]). Release and revoke
// delete their row already.
func (b *Backend) Sweep(ctx context.Context, max int, grace time.Duration) (int, error) {
	var n int64
	_, err := b.write(ctx, protocol.OpSweep, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		res, err := tx.ExecContext(ctx, qSweep, micros(now), grace.Microseconds(), max)
		if err != nil {
			return protocol.Result{}, false, err
		}
		n, err = res.RowsAffected()
		return protocol.Result{}, err == nil, err
	})
	return int(n), err
}
