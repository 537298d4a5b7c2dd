package postgres

import (
	"context"

	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.TokenRaiser = (*Backend)(nil)

// RaiseTokens moves the fencing sequence by above every token the store
// issued or holds, in one statement, and returns the new floor (see
// [protocol.TokenRaiser] and raiseTokensSQL): after a restore to an
// earlier point, every later token is greater than those issued since
// that point, if by exceeds how many were.
func (b *Backend) RaiseTokens(ctx context.Context, by int64) (int64, error) {
	if err := protocol.CheckTokenRaise(by); err != nil {
		return 0, err
	}
	var floor int64
	err := interpretError(protocol.OpRaiseTokens,
		b.pool.QueryRow(ctx, raiseTokensSQL.sql, raiseTokensSQL.bind(args{"by": by})...).Scan(&floor))
	return floor, err
}
