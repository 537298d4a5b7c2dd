package protocol

import (
	"context"
	"fmt"
)

// TokenRaiser is implemented by backends whose fencing tokens come from a
// counter of their own (both SQL backends): `leasectl fencing raise` calls
// it after the store was restored to an earlier point.
//
// A store brought back to an earlier point (a backup or a point-in-time
// recovery restored, an asynchronous standby promoted without the last
// commits) has forgotten the tokens it issued after that point, and would
// issue them again while the holders of the forgotten leases, and the
// resources they wrote to, still know them. Raising the counter past
// every token the store holds by more than it can have issued since the
// point restored makes every later token greater than any issued before.
// (An etcd store's tokens come from the cluster's revision: restore its
// snapshot with `etcdutl snapshot restore --bump-revision` instead.)
type TokenRaiser interface {
	// RaiseTokens moves the fencing counter to by above the greatest
	// token the store holds or has counted, and returns the new floor:
	// every token issued after RaiseTokens returns is greater than it.
	// It moves the ids of later audit records by past those the store
	// holds or has given the same way, in the same transaction: the
	// restore took the ids back too, and records written after it would
	// take again ids a follower already read past, and be skipped (the
	// SQLite file's id counter; PostgreSQL's ids follow the cluster's
	// transaction ids, so there by bounds the transaction ids assigned
	// since the point restored). Leases and the records are untouched,
	// and tokens issued for a key keep increasing. by must be at least
	// [MinTokenRaise]: a smaller step could be overtaken by acquires
	// running meanwhile.
	RaiseTokens(ctx context.Context, by int64) (floor int64, err error)
}

// Bounds of [TokenRaiser.RaiseTokens]'s step. The largest keeps tokens
// below 2^53, which JSON readers that hold numbers as doubles still read
// exactly, for centuries of raises.
const (
	MinTokenRaise     = 1_000
	MaxTokenRaise     = 1_000_000_000_000
	DefaultTokenRaise = 1_000_000_000
)

// OpRaiseTokens names a raise of the fencing counter in errors and
// [OperationEvent]s.
const OpRaiseTokens Op = "raise-tokens"

// CheckTokenRaise returns an error with [StatusInvalid] when by is outside
// [MinTokenRaise, MaxTokenRaise].
func CheckTokenRaise(by int64) error {
	if by < MinTokenRaise || by > MaxTokenRaise {
		return &Error{Op: OpRaiseTokens, Status: StatusInvalid, Message: fmt.Sprintf(
			"the step to raise tokens by must be from %d to %d, got %d", int64(MinTokenRaise), int64(MaxTokenRaise), by)}
	}
	return nil
}
