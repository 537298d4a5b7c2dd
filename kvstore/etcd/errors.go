package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

func (b *Backend) interpret(ctx context.Context, op protocol.Op, err error) error {
	return interpretError(ctx, op, b.shown, err)
}

// interpretError is the one place where this backend turns client and
// server errors into the protocol's: timeout when the operation's deadline
// passed or it was cancelled (the effect of a change is then unknown: a
// retry with the same request id tells), unavailable for everything else
// (no leader, no quorum, a member unreachable, authentication refused), with
// a message naming the cluster and what to do. A *protocol.Error passes
// through with op filled in; a tampered audit record is unavailable.
func interpretError(ctx context.Context, op protocol.Op, where string, err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Op == "" {
			pe.Op = op
		}
		return pe
	}
	var tampered *errTampered
	if errors.As(err, &tampered) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the audit trail was altered", where)
	}
	if errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled) {
		return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the caller cancelled the operation before it finished", where)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the deadline passed before the cluster answered", where)
	}
	switch {
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrLeaderChanged), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost):
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the cluster has no leader or lost quorum; retry with the same request id", where)
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrPermissionDenied),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrUserEmpty):
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: authentication or permission refused: check the user, password and its role's permission on the prefix", where)
	case errors.Is(err, rpctypes.ErrCompacted):
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the revision asked for was compacted", where)
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.DeadlineExceeded:
			return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the deadline passed before the cluster answered", where)
		case codes.Canceled:
			return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the operation was cancelled", where)
		case codes.Unauthenticated, codes.PermissionDenied:
			return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: authentication or permission refused", where)
		}
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: %s", where, "the cluster could not be reached or refused the operation")
}

// errInternal reports an answer of the cluster this backend cannot read: a
// malformed or foreign entry under its prefix.
func errInternal(op protocol.Op, format string, args ...any) error {
	return &protocol.Error{Op: op, Status: protocol.StatusUnavailable, Message: fmt.Sprintf(format, args...)}
}
