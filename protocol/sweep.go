package protocol

import (
	"context"
	"time"
)

// Sweeper is implemented by backends that keep the rows of expired,
// released and revoked leases until they are removed (both SQL backends and
// memstore). [Runtime] sweeps such a backend in the background (see
// [Config].SweepEvery); `leasectl gc` sweeps on demand.
//
// Sweeping never weakens fencing: a backend removes a row only when an
// acquire of its key after the removal is sure to get a greater token.
// Nor does it touch the audit trail: the lease had already ended. What it
// changes is the answer to the former holder: a renew or release after
// the row is gone answers not_found instead of expired, which is why only
// rows that ended more than a grace period ago go.
type Sweeper interface {
	// Sweep removes up to max rows of leases that expired or ended more
	// than grace ago (by the backend's clock) and returns how many it
	// removed. Many processes may sweep one store at once.
	Sweep(ctx context.Context, max int, grace time.Duration) (int, error)
}

// OpSweep names a sweep in an [OperationEvent].
const OpSweep Op = "sweep"
