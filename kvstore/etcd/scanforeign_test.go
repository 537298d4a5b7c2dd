package etcd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestScanBesideForeignKeysInsideALeaseStaysBounded: another client's
// keys may lie inside a lease's own prefix (PREFIX/k/NS\0NAME\0...,
// none an entry of the store). When a range of the scan (600 entries)
// ends among them, holding that lease alone, the scan reads the lease
// again; that read must stay as bounded as a range is, not take every
// foreign key under the lease's prefix in one response: here 2,000 keys
// of 1 KiB, which a client that caps its responses at 1 MiB (a common
// clientv3.Config.MaxCallRecvMsgSize) refuses, failing the list although
// each range of 600 entries fits.
func TestScanBesideForeignKeysInsideALeaseStaysBounded(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	capped, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
		MaxCallRecvMsgSize: 1 << 20, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = capped.Close() })
	b, err := etcd.New(ctx, capped, &etcd.Config{Prefix: c.Prefix(t)})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(ctx) })
	a, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "o", TTL: time.Minute, RequestID: "acquire-b"})
	if err != nil || a.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %v %v", a.Status, err)
	}
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// Between the lease's liveness entry (\0e) and its owner entry (\0o).
	value := strings.Repeat("x", 1024)
	for i := 0; i < 2000; i += 100 {
		var puts []clientv3.Op
		for j := i; j < i+100; j++ {
			puts = append(puts, clientv3.OpPut(fmt.Sprintf("%sk/ns\x00b\x00f%05d", b.Prefix(), j), value))
		}
		if _, err := cli.Txn(ctx).Then(puts...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	page, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 100})
	if err != nil {
		t.Fatalf("list beside 2,000 foreign keys of 1 KiB inside the lease's prefix, on a client taking responses up to 1 MiB: %v; "+
			"want the live lease, read in responses no larger than a range of 600 entries", err)
	}
	if len(page.Leases) != 1 || page.Leases[0].Key != key("b") || page.Leases[0].Token != a.Lease.Token {
		t.Fatalf("list answered %+v; want the live lease ns/b (token %d)", page.Leases, a.Lease.Token)
	}
}
