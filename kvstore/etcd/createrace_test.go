package etcd_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestStoreBelowAndAboveCreatedAtOnce: two processes creating stores at
// once, one under PREFIX/k/x/ and one under PREFIX/, leave at most one of
// them: the one below lies in the entries of the one above
// (TestNestedPrefixRefused, TestStoreAboveExistingStoreRefused). Here
// the store above is created after the one below looked for it
// (checkOutside) and before the one below wrote its format record: the
// one below must then be refused, as it is when the store above came
// first. Both were created, and the one below could not be opened again.
func TestStoreBelowAndAboveCreatedAtOnce(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	outer := c.Prefix(t)
	inner := outer + "k/x/"
	var armed atomic.Bool
	armed.Store(true)
	var aboveErr error
	// The first transaction of the open below that compares its own
	// format record (ensureFormat's) runs once the store above exists.
	between := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && comparesKey(txn, inner+"meta") && armed.CompareAndSwap(true, false) {
			var above *etcd.Backend
			if above, aboveErr = etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: outer}); aboveErr == nil {
				_ = above.Close(context.Background())
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	below, err := etcd.Open(ctx, etcd.WithDialOptions(&etcd.Config{Endpoints: c.Endpoints(), Prefix: inner}, between))
	if below != nil {
		_ = below.Close(context.Background())
	}
	if armed.Load() {
		t.Fatal("the open below sent no transaction comparing its format record")
	}
	if aboveErr != nil {
		t.Fatalf("the store above, created while the one below was being created: %v", aboveErr)
	}
	if err == nil || !errors.Is(err, protocol.ErrInvalid) {
		cli, cerr := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()})
		if cerr != nil {
			t.Fatal(cerr)
		}
		defer cli.Close()
		metas := 0
		for _, m := range []string{outer + "meta", inner + "meta"} {
			if g, gerr := cli.Get(ctx, m, clientv3.WithCountOnly()); gerr == nil {
				metas += int(g.Count)
			}
		}
		again, reopen := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: inner})
		if again != nil {
			_ = again.Close(context.Background())
		}
		t.Fatalf("the store under %s was created (%v) while the store under %s above it was (%d format records written); "+
			"want it refused as invalid; reopened now: %v", inner, err, outer, metas, reopen)
	}
}

// comparesKey reports whether txn compares key.
func comparesKey(txn *pb.TxnRequest, key string) bool {
	for _, c := range txn.Compare {
		if string(c.Key) == key {
			return true
		}
	}
	return false
}
