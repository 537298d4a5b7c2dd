package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestSubscribeRefusedForItsCredentialsSaysForbidden: a waiter's watch of
// its key, made by a user whose role lost its permission on the store's
// prefix after the store was opened, is refused by the cluster: Subscribe
// answers it as the refusal it is (protocol.ErrForbidden, as every other
// call of the backend), not as an outage to wait out.
func TestSubscribeRefusedForItsCredentialsSaysForbidden(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := authCluster(t, "rootpw")
	root := rootClient(t, host, "rootpw")
	const prefix = "/sub/"
	addUser(t, root, "waiter", clientv3.PermissionType(clientv3.PermReadWrite), prefix)
	b := openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "waiter", Password: "waiterpw"})
	if _, err := root.RoleRevokePermission(ctx, "waiter", prefix, clientv3.GetPrefixRangeEnd(prefix)); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, unsubscribe, err := b.Subscribe(sctx, key("k"))
	if err == nil {
		unsubscribe()
		t.Fatal("Subscribe by a user without permission on the prefix answered a watch; want the cluster's refusal")
	}
	if !errors.Is(err, protocol.ErrForbidden) {
		t.Fatalf("Subscribe by a user without permission on the prefix: %v; want an error matching protocol.ErrForbidden", err)
	}
}
