package etcd_test

import (
	"context"
	"errors"
	"fmt"
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

// TestPruneAnswersByItsDeadline: a prune whose cluster stops answering
// after its first batch (two batches of records) answers when its
// context's deadline passes, as every call does, however it then tries
// to free its request id's claim: that try must not hold the caller past
// its deadline. The client's transactions after the first batch wait for
// their context to end (a cluster that lost quorum, as the client sees it).
func TestPruneAnswersByItsDeadline(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	var firstBatchDone atomic.Bool
	stall := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(*pb.TxnRequest); ok && firstBatchDone.Load() {
			<-ctx.Done() // no answer any more
			return ctx.Err()
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if txn, ok := req.(*pb.TxnRequest); ok && deletes(txn) && err == nil {
			firstBatchDone.Store(true)
		}
		return err
	})
	pruner := open(t, etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, stall))
	rt := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	ctx := t.Context()
	const records = pruneBatchSize + 50 // two batches
	for i := range records {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	const budget = 5 * time.Second
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	deadline, _ := pctx.Deadline()
	_, err := pruner.PruneAudit(pctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune-deadline"})
	late := time.Since(deadline)
	if !firstBatchDone.Load() {
		t.Fatalf("the prune's first batch did not commit within %v (%v): nothing tested", budget, err)
	}
	if !errors.Is(err, protocol.ErrTimeout) {
		t.Errorf("the prune cut off by its deadline: %v; want timeout", err)
	}
	if late > time.Second {
		t.Fatalf("the prune answered %v after its deadline (%v), the caller held while it tried to free its claim; want by its deadline", late.Round(100*time.Millisecond), err)
	}
}
