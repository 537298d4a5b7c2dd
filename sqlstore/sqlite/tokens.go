package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.TokenRaiser = (*Backend)(nil)

// RaiseTokens moves the fencing counter by above the greatest token the
// file holds or counted, and the audit trail's id counter by above the
// greatest id it holds or counted, in one write transaction, and returns
// the new floor of tokens (see [protocol.TokenRaiser]): after the file
// was restored from a copy, every later token is greater than those
// issued since the copy, if by exceeds how many were, and every later
// audit record's id greater than those given since the copy, if by
// exceeds how many were, so that a follower that read them does not skip
// the new ones.
func (b *Backend) RaiseTokens(ctx context.Context, by int64) (int64, error) {
	if err := protocol.CheckTokenRaise(by); err != nil {
		return 0, err
	}
	var floor int64
	_, err := b.write(ctx, protocol.OpRaiseTokens, func(ctx context.Context, tx *sql.Tx, _ time.Time) (protocol.Result, bool, error) {
		if err := tx.QueryRowContext(ctx, qRaiseTokens, by).Scan(&floor); err != nil {
			return protocol.Result{}, false, err
		}
		if _, err := tx.ExecContext(ctx, qSeedAuditIDs); err != nil {
			return protocol.Result{}, false, err
		}
		if _, err := tx.ExecContext(ctx, qRaiseAuditIDs, by); err != nil {
			return protocol.Result{}, false, err
		}
		return protocol.Result{}, true, nil
	})
	if err != nil {
		return 0, err
	}
	return floor, nil
}
