package etcd

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/protocol"
)

// TestWatchRefusalIsInterpreted: a member that refuses to make a watch
// (a follower's, made again after its member restarted or lost the
// leader) gives its reason as the text of its status error, "rpc error:
// code = PermissionDenied desc = etcdserver: permission denied", and the
// client passes it on as a plain error of that text (clientv3's
// addSubstream). It is read as the same refusal as the client's own error:
// a revoked permission matches protocol.ErrForbidden (it was unavailable
// only, "the cluster could not be reached or refused the operation", and
// a follower retried it forever), "user name is empty" is a refusal only
// without a user, and an invalid token or an unknown reason is none.
func TestWatchRefusalIsInterpreted(t *testing.T) {
	ctx := context.Background()
	given := func(reason error) error { return rpctypes.Error(errors.New(reason.Error())) } // as clientv3 hands it on
	for _, c := range []struct {
		what    string
		reason  error
		hasUser bool
		want    error // nil: unavailable, no credentials refusal
	}{
		{"permission denied", rpctypes.ErrGRPCPermissionDenied, true, protocol.ErrForbidden},
		{"user name is empty, without a user", rpctypes.ErrGRPCUserEmpty, false, protocol.ErrUnauthenticated},
		{"user name is empty, with a user", rpctypes.ErrGRPCUserEmpty, true, nil},
		{"invalid auth token", rpctypes.ErrGRPCInvalidAuthToken, true, nil},
		{"an unknown reason", errors.New("rpc error: code = Unknown desc = etcdserver: something else"), true, nil},
	} {
		cli := clientv3.NewCtxClient(ctx)
		if c.hasUser {
			cli.Username, cli.Password = "app", "secret"
		}
		b := &Backend{cli: cli, shown: "etcd 127.0.0.1:2379 prefix /p/"}
		err := b.interpret(ctx, protocol.OpAudit, given(c.reason))
		switch {
		case !errors.Is(err, protocol.ErrUnavailable):
			t.Errorf("%s: %v; want unavailable", c.what, err)
		case c.want == nil && protocol.CredentialsRefused(err):
			t.Errorf("%s: %v; want no credentials refusal", c.what, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v; want it matching %v", c.what, err, c.want)
		}
	}
}
