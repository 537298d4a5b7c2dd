package etcd_test

import (
	"context"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler/schedulertest"
)

// TestScheduler runs the scheduler suite on the shared cluster, each case
// under a prefix of its own, every worker on a Backend with a client of
// its own, as a process of its own would have, and the fenced resource in
// memory. The cluster judges expiry and the end of a lock-delay late,
// never early, by up to lateExpiry (DESIGN.md, docs/etcd.md): the cases
// that time a take after one allow that much more. It runs beside the
// package's other parallel tests: the suite mostly waits for its 2s TTLs
// (its cases one after the other).
func TestScheduler(t *testing.T) {
	t.Parallel()
	schedulertest.Run(t, func(t *testing.T) schedulertest.Harness {
		c := etcdcluster.Shared(t)
		prefix := c.Prefix(t)
		return schedulertest.Harness{
			NewStore: func(t *testing.T) protocol.Store {
				return schedulertest.OpenStore(t, func() (*etcd.Backend, error) {
					return etcd.Open(context.Background(), &etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix})
				})
			},
			Resource:   schedulertest.MemResource(),
			LateExpiry: lateExpiry,
		}
	})
}
