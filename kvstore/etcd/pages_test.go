package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestReadsOfSeveralRangesOutliveACompaction: a read that spans several
// ranges at one revision (a list page of 1000, Counts, Namespaces, Sweep,
// an audit page of 1000) answers when the cluster
// compacts that revision between its ranges (auto-compaction on a busy
// cluster), by reading again at a newer one; a list page after a cursor
// still starts after the cursor. (A follower pages by cursor: each page
// is a read of its own.) Before, each failed unavailable ("the
// revision asked for was compacted"). The client's range at a revision
// (a read's second range) first compacts the cluster past it, once per
// read.
//
// Not parallel: it compacts the shared cluster (see TestFollowBehindCompaction).
func TestReadsOfSeveralRangesOutliveACompaction(t *testing.T) {
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var armed, compactions atomic.Int64
	compactFirst := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.RangeRequest); ok && r.Revision != 0 && armed.CompareAndSwap(1, 0) {
			p, err := cli.Put(ctx, "/compaction-probe", "x")
			if err == nil {
				_, err = cli.Compact(ctx, p.Header.Revision)
			}
			if err != nil {
				t.Error(err)
			}
			compactions.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	b := open(t, etcd.WithDialOptions(&etcd.Config{Prefix: c.Prefix(t)}, compactFirst))
	const n = 700 // 2100 lease entries (4 ranges of 600), 700 records (2 of 500)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("k%04d", i)), Owner: "o", TTL: time.Hour,
				RequestID: fmt.Sprint("r", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	read := func(what string, f func() error) {
		t.Helper()
		before := compactions.Load()
		armed.Store(1)
		err := f()
		armed.Store(0)
		if compactions.Load() == before {
			t.Errorf("%s: read no second range at a revision", what)
		}
		if err != nil {
			t.Errorf("%s with a compaction between its ranges: %v", what, err)
		}
	}
	read("list of 1000", func() error {
		page, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 1000})
		if err == nil && len(page.Leases) != n {
			return fmt.Errorf("%d leases, want %d", len(page.Leases), n)
		}
		return err
	})
	first, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	read("list of 1000 after a cursor", func() error {
		page, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 1000, Cursor: first.NextCursor})
		if err == nil && (len(page.Leases) != n-10 || page.Leases[0].Key.Name != "k0010") {
			return fmt.Errorf("%d leases from %v, want %d from k0010", len(page.Leases), page.Leases[0].Key, n-10)
		}
		return err
	})
	read("counts", func() error {
		leases, records, err := b.Counts(ctx)
		if err == nil && (leases != n || records != n) {
			return fmt.Errorf("%d leases, %d records; want %d of each", leases, records, n)
		}
		return err
	})
	read("namespaces", func() error {
		_, err := b.Namespaces(ctx, "", 10)
		return err
	})
	read("sweep", func() error {
		res, err := b.Sweep(ctx, 10, 0)
		if err == nil && res.Removed != 0 {
			return fmt.Errorf("removed %d of %d live leases", res.Removed, n)
		}
		return err
	})
	read("audit page of 1000", func() error {
		page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: 1000})
		if err == nil && len(page.Records) != n {
			return fmt.Errorf("%d records, want %d", len(page.Records), n)
		}
		return err
	})
}
