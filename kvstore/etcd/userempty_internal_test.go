package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/protocol"
)

// TestUserEmptyWithAUserIsNoRefusal: a client that has a user (the DSN
// named one) gets "etcdserver: user name is empty" when its token is
// refreshed under a request (the token expired: the retry interceptor
// clears it while it authenticates again, etcd-io/etcd#13305) or a member
// that does not know its token: a transient fault of the cluster, that
// the next try mends, not a refusal of the DSN's credentials. Matching
// protocol.ErrUnauthenticated, it makes Hold and the scheduler lose their
// leases at once and leasectl exit 7, saying "the DSN names no user",
// which it did.
func TestUserEmptyWithAUserIsNoRefusal(t *testing.T) {
	ctx := context.Background()
	cli := clientv3.NewCtxClient(ctx)
	cli.Username, cli.Password = "app", "secret"
	b := &Backend{cli: cli, shown: "etcd 127.0.0.1:2379 prefix /p/"}
	err := b.interpret(ctx, protocol.OpRenew, rpctypes.ErrUserEmpty)
	if !errors.Is(err, protocol.ErrUnavailable) || errors.Is(err, protocol.ErrUnauthenticated) ||
		strings.Contains(err.Error(), "names no user") {
		t.Fatalf("user name is empty, from a client with user %q: %v; want unavailable, not matching "+
			"protocol.ErrUnauthenticated, and not saying the DSN names no user", cli.Username, err)
	}
}

// TestUserEmptyWithoutAUserIsARefusal: to a client without a user, on a
// cluster with authentication on, "user name is empty" is the refusal of
// the DSN's missing credentials, which no retry mends.
func TestUserEmptyWithoutAUserIsARefusal(t *testing.T) {
	ctx := context.Background()
	b := &Backend{cli: clientv3.NewCtxClient(ctx), shown: "etcd 127.0.0.1:2379 prefix /p/"}
	err := b.interpret(ctx, protocol.OpRenew, rpctypes.ErrUserEmpty)
	if !errors.Is(err, protocol.ErrUnauthenticated) || !strings.Contains(err.Error(), "names no user") {
		t.Fatalf("user name is empty, from a client without a user: %v; want it matching protocol.ErrUnauthenticated, saying the DSN names no user", err)
	}
}
