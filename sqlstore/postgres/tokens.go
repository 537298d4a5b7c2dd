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
// that point, if by exceeds how many were. A sequence that caches values
// is refused as Open refuses it, and left where it is.
func (b *Backend) RaiseTokens(ctx context.Context, by int64) (int64, error) {
	if err := protocol.CheckTokenRaise(by); err != nil {
		return 0, err
	}
	var (
		cache int64
		floor *int64
	)
	err := b.pool.QueryRow(ctx, raiseTokensSQL.sql, raiseTokensSQL.bind(args{"by": by})...).Scan(&cache, &floor)
	if err != nil {
		return 0, interpretError(protocol.OpRaiseTokens, err)
	}
	if floor == nil {
		return 0, cachedSequenceError(protocol.OpRaiseTokens, cache)
	}
	return *floor, nil
}
