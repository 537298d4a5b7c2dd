// Package getspy wraps a protocol.Runtime so that a test sees each Get it
// answers: the reads protocol.WatchLease makes on each signal, which tell a
// test that a holder acted on a signal. A Spy is safe for concurrent use.
package getspy

import (
	"context"

	"github.com/leasestore/leasestore/protocol"
)

// Spy is a protocol.Store (and a Notifier through the embedded Runtime)
// that sends on Gets, without blocking, after each Get.
type Spy struct {
	*protocol.Runtime
	// Gets receives once after each Get, if nothing is waiting in it.
	Gets chan struct{}
}

// New returns a Spy of rt.
func New(rt *protocol.Runtime) Spy {
	return Spy{Runtime: rt, Gets: make(chan struct{}, 1)}
}

// Get answers as the Runtime does, then sends on Gets.
func (s Spy) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	res, err := s.Runtime.Get(ctx, req)
	select {
	case s.Gets <- struct{}{}:
	default:
	}
	return res, err
}
