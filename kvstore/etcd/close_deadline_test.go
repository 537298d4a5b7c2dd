//go:build unix

package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// TestCloseAnswersByItsDeadline: a prune cut off by its deadline frees its
// request id's claim in the background (up to 5s), and Close waited for
// that, whatever its context said, while the cluster did not answer (its
// members frozen here: a paused VM, a network that drops packets). Close
// must answer by its deadline with a timeout error that matches the
// context's and names what it left; the Backend stays closed (later calls
// answer closed) and its shutdown finishes in the background (a second
// Close, once the cluster answers again, waits for it and answers nil).
func TestCloseAnswersByItsDeadline(t *testing.T) {
	t.Parallel()
	c, err := etcdcluster.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	resume := func() {
		for i := range c.Members {
			c.Resume(i)
		}
	}
	t.Cleanup(resume) // before Stop
	const prefix = "/close-deadline/"
	ctx := t.Context()
	rt := protocol.New(openOn(t, c, &etcd.Config{Prefix: prefix}), nil)
	const records = pruneBatchSize + 50 // two batches
	for i := range records {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "o", TTL: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the leases have ended: the prune removes their records
	// Once the prune's first batch committed, every member freezes.
	var firstBatchDone atomic.Bool
	freeze := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if txn, ok := req.(*pb.TxnRequest); ok && deletes(txn) && err == nil && !firstBatchDone.Swap(true) {
			for i := range c.Members {
				c.Pause(i)
			}
		}
		return err
	})
	b, err := etcd.Open(ctx, clockJudged(etcd.WithDialOptions(&etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix}, freeze)))
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, perr := b.PruneAudit(pctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "cut-off"})
	if !firstBatchDone.Load() || !errors.Is(perr, protocol.ErrTimeout) {
		t.Fatalf("the prune (first batch committed: %v): %v; want timeout after its first batch: nothing tested", firstBatchDone.Load(), perr)
	}

	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	start := time.Now()
	cerr := b.Close(cctx)
	took := time.Since(start)
	if took > time.Second {
		t.Fatalf("Close with a 300ms context, while a prune cut off by its deadline frees its claim on a cluster that does not answer: "+
			"returned after %v (%v); want by its deadline", took.Round(time.Millisecond), cerr)
	}
	if !errors.Is(cerr, protocol.ErrTimeout) || !errors.Is(cerr, context.DeadlineExceeded) || !strings.Contains(cerr.Error(), "request id") {
		t.Errorf("Close cut off by its deadline: %v; want timeout matching context.DeadlineExceeded that names the prune's request id it left", cerr)
	}
	t.Logf("Close cut off: %v", cerr)
	if _, err := b.Get(ctx, protocol.GetRequest{Key: key("k0")}); !errors.Is(err, protocol.ErrClosed) {
		t.Errorf("get after a Close cut off by its deadline: %v; want closed", err)
	}
	if _, _, err := b.Subscribe(ctx, key("k0")); !errors.Is(err, protocol.ErrClosed) {
		t.Errorf("subscribe after a Close cut off by its deadline: %v; want closed", err)
	}
	// The cluster answers again: the shutdown finishes, and a second
	// Close waits for it.
	resume()
	if err := b.Close(ctx); err != nil {
		t.Errorf("second Close, once the cluster answers: %v; want nil", err)
	}
}

// openOn opens a Backend on cluster c, closed when the test ends.
func openOn(t *testing.T, c *etcdcluster.Cluster, cfg *etcd.Config) *etcd.Backend {
	t.Helper()
	cfg.Endpoints = c.Endpoints()
	b, err := etcd.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// TestCloseAnswersByItsDeadlineWhileAWatchIsMadeAgain: a subscription's
// watch ended (its member lost the leader: two members down) and is being
// made again on the last member, which does not answer (frozen). Close
// waited for the subscription's goroutine, which waited for the watch to
// be made, until the member answered or the subscriber cancelled, however
// long, whatever Close's context said. Close must answer by its deadline,
// the subscription get its last signal, and later calls answer closed.
func TestCloseAnswersByItsDeadlineWhileAWatchIsMadeAgain(t *testing.T) {
	t.Parallel()
	c, err := etcdcluster.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Cleanup(func() { c.Resume(0) }) // before Stop
	ctx := t.Context()
	b, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/close-watch/"})
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel, err := b.Subscribe(ctx, key("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	c.Kill(1)
	c.Kill(2)
	select {
	case <-ch: // the watch ended: no leader
	case <-time.After(20 * time.Second):
		t.Fatal("the subscription got no signal within 20s of its member losing the leader: nothing tested")
	}
	c.Pause(0)
	// The watch is made again after a pause of at most 2s, and waits for
	// the frozen member.
	time.Sleep(2500 * time.Millisecond)

	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- b.Close(cctx) }()
	var cerr error
	select {
	case cerr = <-closed:
	case <-time.After(5 * time.Second):
		cancel() // lets the old Close return
		c.Resume(0)
		t.Fatalf("Close with a 300ms context, while a subscription's watch is made again on a member that does not answer: "+
			"still running after 5s (it returned %v after the subscriber cancelled); want by its deadline", <-closed)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close with a 300ms context, while a subscription's watch is made again on a member that does not answer: "+
			"returned after %v (%v); want by its deadline", took.Round(time.Millisecond), cerr)
	}
	if cerr != nil && !errors.Is(cerr, protocol.ErrTimeout) {
		t.Errorf("Close: %v; want nil, or timeout naming what it left", cerr)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Error("the subscription got no last signal within 5s of Close")
	}
	if _, err := b.Get(ctx, protocol.GetRequest{Key: key("k")}); !errors.Is(err, protocol.ErrClosed) {
		t.Errorf("get after Close: %v; want closed", err)
	}
}
