package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
)

// open opens a Backend on the shared cluster under prefix; the test closes
// it when it ends (closing twice is a no-op).
func open(t *testing.T, cfg *etcd.Config) *etcd.Backend {
	t.Helper()
	c := etcdcluster.Shared(t)
	cfg.Endpoints = c.Endpoints()
	b, err := etcd.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// TestContract runs the backend contract suite. Each subtest gets a prefix
// of its own; its two handles are two Backends with clients of their own,
// as two processes would have, sharing the suite's clock.
func TestContract(t *testing.T) {
	contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
		prefix := etcdcluster.Shared(t).Prefix(t)
		first := open(t, etcd.WithTestClock(&etcd.Config{Prefix: prefix}, clock.Now))
		second := open(t, etcd.WithTestClock(&etcd.Config{Prefix: prefix}, clock.Now))
		return contract.Harness{Backend: first, Second: second, Audit: first}
	})
}

// clockJudged is cfg (a new Config when nil) for a Backend that judges
// expiry by this process's clock, as with a test clock, rather than by
// whether etcd has expired the lease's etcd lease yet: a lease of a
// millisecond (any Backend's) has ended a few milliseconds later, so a
// prune removes its records without waiting for etcd (a prune keeps the
// records of a live lease's acquire and latest renew).
func clockJudged(cfg *etcd.Config) *etcd.Config { return etcd.WithTestClock(cfg, time.Now) }
