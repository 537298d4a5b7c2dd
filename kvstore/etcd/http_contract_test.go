package etcd_test

import (
	"context"
	"testing"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/httpcontract"
	"github.com/leasestore/leasestore/kvstore/etcd"
)

// openOwned is open without the cleanup: the HTTP harness closes what it
// serves.
func openOwned(t *testing.T, cfg *etcd.Config) *etcd.Backend {
	t.Helper()
	cfg.Endpoints = etcdcluster.Shared(t).Endpoints()
	b, err := etcd.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return b
}

// TestContractOverHTTP runs the contract suite through the HTTP API: each
// case's two handles are httpapi clients of two servers on loopback ports,
// each serving its own Backend on one prefix.
func TestContractOverHTTP(t *testing.T) {
	contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
		prefix := etcdcluster.Shared(t).Prefix(t)
		first := openOwned(t, etcd.WithTestClock(&etcd.Config{Prefix: prefix}, clock.Now))
		second := openOwned(t, etcd.WithTestClock(&etcd.Config{Prefix: prefix}, clock.Now))
		return httpcontract.Harness(t, first, second, first)
	})
}

// TestWaitOverHTTPIsWoken: a waiter over HTTP is woken by a release
// through another server on the prefix (etcd Watch), not by its re-check.
func TestWaitOverHTTPIsWoken(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	httpcontract.Woken(t, openOwned(t, &etcd.Config{Prefix: prefix}), openOwned(t, &etcd.Config{Prefix: prefix}))
}
