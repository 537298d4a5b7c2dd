package etcd_test

import (
	"context"
	"testing"

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
