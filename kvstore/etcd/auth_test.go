package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestAuthFromDSN: on a cluster with authentication on (a one-member
// cluster of its own), a DSN's user and password open the store and
// serve leases; a wrong password is refused as unavailable, saying
// authentication failed, and the error never holds the password.
func TestAuthFromDSN(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := authCluster(t, "r00t-Pw:@/")

	cfg, err := etcd.ParseDSN("etcd://root:r00t-Pw%3A%40%2F@" + host + "/auth")
	if err != nil {
		t.Fatal(err)
	}
	b, err := etcd.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open with the right password: %v", err)
	}
	rt := protocol.New(b, nil)
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatalf("acquire as root: %v", err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	cfg, err = etcd.ParseDSN("etcd://root:wr0ngPassw0rd@" + host + "/auth")
	if err != nil {
		t.Fatal(err)
	}
	_, err = etcd.Open(ctx, cfg)
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "authentication") || strings.Contains(err.Error(), "wr0ngPassw0rd") {
		t.Fatalf("open with a wrong password: %v, want unavailable saying authentication failed, without the password", err)
	}
	// A refusal no retry mends, not an outage (leasectl exits 7).
	if !errors.Is(err, protocol.ErrUnauthenticated) || errors.Is(err, protocol.ErrForbidden) || !strings.Contains(err.Error(), "the DSN's user and password") {
		t.Fatalf("open with a wrong password: %v, want it to match protocol.ErrUnauthenticated, naming the DSN's user and password", err)
	}

	// A user the cluster lets in whose role may not use the prefix (no
	// permission at all), or may only read it, is refused for its
	// permission: ErrForbidden, naming the grant.
	root := rootClient(t, host, "r00t-Pw:@/")
	const prefix = "/auth/"
	addUser(t, root, "none", clientv3.PermissionType(clientv3.PermRead))
	addUser(t, root, "reader", clientv3.PermissionType(clientv3.PermRead), prefix)
	wantForbidden := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, protocol.ErrUnavailable) || !errors.Is(err, protocol.ErrForbidden) || errors.Is(err, protocol.ErrUnauthenticated) ||
			!strings.Contains(err.Error(), "etcdctl role grant-permission") {
			t.Fatalf("%s: %v, want unavailable matching protocol.ErrForbidden, naming etcdctl role grant-permission", what, err)
		}
	}
	_, err = etcd.Open(ctx, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "none", Password: "nonepw"})
	wantForbidden("open by a user whose role has no permission on the prefix", err)
	b, err = etcd.Open(ctx, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "reader", Password: "readerpw"})
	if err != nil {
		t.Fatalf("open by a user whose role may read the prefix: %v", err)
	}
	rt = protocol.New(b, nil)
	defer rt.Close(context.Background())
	_, err = rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k2"), Owner: "o", TTL: time.Minute})
	wantForbidden("acquire by a user whose role may only read the prefix", err)
	wantForbidden("health of a user whose role may only read the prefix", rt.Health(ctx))
}

// authCluster starts a one-member cluster of the test's own with
// authentication on and a user root (role root) whose password is
// password, stopped when the test ends, and returns its host:port.
func authCluster(t *testing.T, password string) string {
	t.Helper()
	return strings.TrimPrefix(startAuthCluster(t, password).Members[0].ClientURL, "http://")
}

// startAuthCluster is authCluster returning the cluster, for a test that
// kills and restarts its member.
func startAuthCluster(t *testing.T, password string) *etcdcluster.Cluster {
	t.Helper()
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, &etcdcluster.Options{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// rootClient returns a client of authCluster's host as its user root,
// closed when the test ends.
func rootClient(t *testing.T, host, password string) *clientv3.Client {
	t.Helper()
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{host}, Username: "root", Password: password,
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	return root
}

// addUser adds through root a user of that name, password name+"pw",
// whose role of the same name has perm on each of keys (a key ending with
// "/" stands for every key under it; none: no permission at all).
func addUser(t *testing.T, root *clientv3.Client, name string, perm clientv3.PermissionType, keys ...string) {
	t.Helper()
	ctx := t.Context()
	if _, err := root.RoleAdd(ctx, name); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		end := ""
		if strings.HasSuffix(k, "/") {
			end = clientv3.GetPrefixRangeEnd(k)
		}
		if _, err := root.RoleGrantPermission(ctx, name, k, end, perm); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := root.UserAdd(ctx, name, name+"pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.UserGrantRole(ctx, name, name); err != nil {
		t.Fatal(err)
	}
}
