package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.TokenRaiser = (*Backend)(nil)

// RaiseTokens moves the fencing sequence by above every token the store
// issued or holds, and the audit trail's ids by above every id it holds or
// gave, in one transaction, and returns the new floor of tokens (see
// [protocol.TokenRaiser], raiseTokensSQL and raiseAuditIDsSQL): after a
// restore to an earlier point, every later token is greater than those
// issued since that point, if by exceeds how many were, and every later
// audit record's id greater than those given since that point, if the
// cluster assigned fewer than by transaction ids since (a record's id is
// its writer's transaction id plus the era's offset), so that a follower
// that read them does not skip the new ones. A sequence that caches
// values, counts down or cycles is refused as Open refuses it, and
// nothing moves; so is a raise whose session may update no row of
// leasestore_audit_era (row-level security on it, or the row deleted),
// which would move the tokens and not the ids.
func (b *Backend) RaiseTokens(ctx context.Context, by int64) (int64, error) {
	if err := b.callRefusal(protocol.OpRaiseTokens); err != nil {
		return 0, err
	}
	if err := protocol.CheckTokenRaise(by); err != nil {
		return 0, err
	}
	var (
		seq   fencingSeq
		floor *int64
	)
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, raiseLockSQL); err != nil {
			return err
		}
		// The ids first: setval is not undone by a rollback.
		var steady, moved bool
		if err := tx.QueryRow(ctx, raiseAuditIDsSQL.sql, raiseAuditIDsSQL.bind(args{"by": by})...).Scan(&steady, &moved); err != nil {
			return err
		}
		if steady && !moved {
			return errEraRowUnmoved()
		}
		return tx.QueryRow(ctx, raiseTokensSQL.sql, raiseTokensSQL.bind(args{"by": by})...).Scan(&seq.cache, &seq.increment,
			&seq.cycle, &floor)
	})
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return 0, pe
	}
	if err != nil {
		return 0, raiseError(ctx, err)
	}
	if floor == nil {
		if err := sequenceError(protocol.OpRaiseTokens, seq); err != nil {
			return 0, err
		}
		return 0, inconsistent(protocol.OpRaiseTokens, "no floor for the sequence %+v", seq)
	}
	return *floor, nil
}

// raiseError interprets an error of RaiseTokens, sent with ctx. A table it lacks a
// privilege on is one a role that only serves may not have been given
// beyond what serving uses (UPDATE on leasestore_audit for the lock, on
// leasestore_audit_era for the move): the message says why the raise
// needs it.
func raiseError(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" && strings.HasPrefix(pe.Message, "permission denied for table ") {
		return forbidden(protocol.OpRaiseTokens, err,
			"postgres: fencing raise moves the audit trail's ids too (the offset in leasestore_audit_era, "+
				"under a lock of leasestore_audit that keeps writers out meanwhile), and %s", privilegeFix(pe.Message))
	}
	return interpretCallError(ctx, protocol.OpRaiseTokens, err)
}
