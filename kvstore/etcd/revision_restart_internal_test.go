package etcd

import (
	"context"
	"errors"
	"testing"

	"github.com/leasestore/leasestore/protocol"
)

// TestRevisionBackRequiresRestart: the refusal of a cluster whose revision
// went back lasts until the process restarts, so it matches
// protocol.ErrRestartRequired, which audit.Watch and leasectl's followers
// end on instead of retrying it for ever.
func TestRevisionBackRequiresRestart(t *testing.T) {
	t.Parallel()
	for _, back := range []*errRevisionBack{{was: 10, now: 5}, {was: 10, now: 10, change: true}} {
		err := interpretError(context.Background(), protocol.OpAudit, "etcd store", false, back)
		if protocol.StatusOf(err) != protocol.StatusUnavailable || !errors.Is(err, protocol.ErrRestartRequired) {
			t.Fatalf("%v: status %s; want unavailable matching protocol.ErrRestartRequired", err, protocol.StatusOf(err))
		}
	}
}
