package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestHealthFailsWhileWritesFail: Health answers unavailable, naming the
// cause and the fix, while the cluster refuses the store's changes but
// still serves its reads (as PostgreSQL's Health does for a read-only
// role): a user whose role may only read the prefix, and a cluster whose
// database filled up (the NOSPACE alarm). Once the alarm is disarmed,
// Health answers ok again. (A one-member cluster of the test's own, with
// authentication on.)
func TestHealthFailsWhileWritesFail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := authCluster(t, "rootpw")
	root := rootClient(t, host, "rootpw")
	const prefix = "/health/"
	addUser(t, root, "reader", clientv3.PermissionType(clientv3.PermRead), prefix)
	owner := openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "root", Password: "rootpw"})
	reader := openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "reader", Password: "readerpw", NoInit: true})
	if err := owner.Health(ctx); err != nil {
		t.Fatalf("health of a writable store: %v", err)
	}
	acquire := func(b *etcd.Backend) error {
		_, err := protocol.New(b, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute})
		return err
	}

	if err := acquire(reader); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("acquire by a user that may only read: %v, want unavailable", err)
	}
	if err := reader.Health(ctx); !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "permission") {
		t.Errorf("health for a user that may only read the prefix: %v, want unavailable naming the permission", err)
	}
	// Such a user (an auditor) opens the store as leasectl does, without
	// NoInit, and reads it; it cannot create a store.
	readOnly := &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "reader", Password: "readerpw"}
	readable(t, readOnly, "a user that may only read")
	noStore := *readOnly
	noStore.Prefix = prefix + "none/"
	if b, err := etcd.Open(ctx, &noStore); err == nil {
		b.Close(context.Background())
		t.Errorf("a user that may only read created a store under %s", noStore.Prefix)
	} else if !contains(err, "permission") {
		t.Errorf("open of no store by a user that may only read: %v, want the permission named", err)
	}

	// A role may write some of the store's entries only: Health puts (in
	// its branch never taken) the lease and the audit entries' first keys
	// and the revision mark, which every change raises, as well as
	// PREFIX/meta, so it fails as the changes do for a user who may not
	// write one of them.
	grants := func(ks ...string) [][2]string {
		var out [][2]string
		for _, k := range ks {
			end := ""
			if strings.HasSuffix(k, "/") {
				end = clientv3.GetPrefixRangeEnd(prefix + k)
			}
			out = append(out, [2]string{prefix + k, end})
		}
		return out
	}
	for _, c := range []struct {
		missing  string // what the role may not write
		writable [][2]string
	}{
		{"k/", grants("meta", "rev", "a/")},
		{"a/", grants("meta", "rev", "k/")},
		{"rev", grants("meta", "k/", "a/")},
	} {
		role := "no-" + strings.TrimSuffix(c.missing, "/")
		steps := []func() error{
			func() error { _, err := root.RoleAdd(ctx, role); return err },
			func() error {
				_, err := root.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermRead))
				return err
			},
		}
		for _, g := range c.writable {
			steps = append(steps, func() error {
				_, err := root.RoleGrantPermission(ctx, role, g[0], g[1], clientv3.PermissionType(clientv3.PermReadWrite))
				return err
			})
		}
		steps = append(steps,
			func() error { _, err := root.UserAdd(ctx, role, "pw-"+role); return err },
			func() error { _, err := root.UserGrantRole(ctx, role, role); return err })
		for _, step := range steps {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		b := openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: role, Password: "pw-" + role, NoInit: true})
		if err := acquire(b); !errors.Is(err, protocol.ErrUnavailable) {
			t.Fatalf("acquire by a user that may not write %s%s: %v, want unavailable", prefix, c.missing, err)
		}
		if err := b.Health(ctx); !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "permission") {
			t.Errorf("health for a user that may not write %s%s: %v, want unavailable naming the permission", prefix, c.missing, err)
		}
	}

	st, err := root.Status(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	member := st.Header.MemberId
	if _, err := pb.NewMaintenanceClient(root.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: member, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	if err := acquire(owner); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("acquire under the NOSPACE alarm: %v, want unavailable", err)
	}
	err = owner.Health(ctx)
	if !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "alarm disarm") {
		t.Errorf("health under the NOSPACE alarm: %v, want unavailable naming the fix (etcdctl alarm disarm)", err)
	}
	// The store still opens to be read (to see what holds it, to prune).
	readable(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "root", Password: "rootpw"}, "the NOSPACE alarm")
	if _, err := root.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: member, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	if err := owner.Health(ctx); err != nil {
		t.Fatalf("health once the alarm was disarmed: %v", err)
	}
	if err := acquire(owner); err != nil {
		t.Fatalf("acquire once the alarm was disarmed: %v", err)
	}
}

// readable opens the store of cfg and reads a key and the trail.
func readable(t *testing.T, cfg *etcd.Config, under string) {
	t.Helper()
	b, err := etcd.Open(t.Context(), cfg)
	if err != nil {
		t.Errorf("open under %s: %v, want the store open for reading", under, err)
		return
	}
	defer b.Close(context.Background())
	if _, err := b.Get(t.Context(), protocol.GetRequest{Key: key("k")}); err != nil {
		t.Errorf("get under %s: %v", under, err)
	}
	if _, err := b.ReadAudit(t.Context(), audit.Query{}); err != nil {
		t.Errorf("audit read under %s: %v", under, err)
	}
}

// openAt opens a Backend with cfg as given (endpoints included) and closes
// it when the test ends.
func openAt(t *testing.T, cfg *etcd.Config) *etcd.Backend {
	t.Helper()
	b, err := etcd.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open as %s: %v", cfg.Username, err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}
