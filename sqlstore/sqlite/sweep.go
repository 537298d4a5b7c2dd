package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.Sweeper = (*Backend)(nil)

// Sweep removes up to max rows of leases that expired more than grace ago
// and sets aside up to max rows of other expired leases (out of the live
// indexes, so that lists do not read them), in one write transaction (see
// [protocol.Sweeper]). Release and revoke delete their row already.
// A max of 0 or less sweeps nothing, and a negative grace counts as 0: a
// lease that has not ended (nor its lock-delay) is never removed.
func (b *Backend) Sweep(ctx context.Context, max int, grace time.Duration) (protocol.SweepResult, error) {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	var n protocol.SweepResult
	if max <= 0 {
		return n, nil // SQLite reads a negative LIMIT as none
	}
	if grace < 0 {
		grace = 0
	}
	_, err := b.write(ctx, protocol.OpSweep, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		n = protocol.SweepResult{}
		gone, err := tx.ExecContext(ctx, qSweep, micros(now), grace.Microseconds(), max)
		if err != nil {
			return protocol.Result{}, false, err
		}
		aside, err := tx.ExecContext(ctx, qSetAside, micros(now), max)
		if err != nil {
			return protocol.Result{}, false, err
		}
		if _, err := tx.ExecContext(ctx, qSweepDelays, micros(now), max); err != nil {
			return protocol.Result{}, false, err
		}
		removed, err := gone.RowsAffected()
		if err != nil {
			return protocol.Result{}, false, err
		}
		setAside, err := aside.RowsAffected()
		n = protocol.SweepResult{Removed: int(removed), SetAside: int(setAside)}
		return protocol.Result{}, err == nil, err
	})
	if err != nil {
		// The batch did not commit (or the sweep failed): nothing went.
		return protocol.SweepResult{}, err
	}
	return n, nil
}
