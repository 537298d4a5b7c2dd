package backendkit

import (
	"context"

	"github.com/leasestore/leasestore/protocol"
)

// WithDeadline returns ctx bounded by [protocol.DefaultTimeout] when it
// carries no deadline, and ctx (with a cancel) otherwise. The runtime gives
// every operation a deadline; a backend called directly calls it first, so
// that an operation on a store that stops answering (an etcd cluster
// without quorum) answers timeout by then, as the runtime would, instead
// of waiting for ever. Call the cancel when the operation is done. A ctx
// with a deadline comes back as it is, with a cancel that does nothing, so
// the runtime's calls pay no allocation for it.
func WithDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, protocol.DefaultTimeout)
}

// noCancel is WithDeadline's cancel for a ctx that had a deadline.
func noCancel() {}
