package etcd_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// faultCluster starts a 3-member cluster of the test's own (the test
// kills members) and a runtime on it through every member.
func faultCluster(t *testing.T, prefix string) (*etcdcluster.Cluster, *protocol.Runtime) {
	t.Helper()
	c, err := etcdcluster.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b, err := etcd.Open(t.Context(), &etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(b, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return c, rt
}

// untilAnswered calls op (which sends its request id each time) with a
// 2 s deadline per attempt until it answers other than timeout or
// unavailable, for at most 30 s, and returns the last answer.
func untilAnswered(t *testing.T, op func(ctx context.Context) (protocol.Result, error)) (protocol.Result, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		res, err := op(ctx)
		cancel()
		st := protocol.StatusOf(err)
		if (st != protocol.StatusTimeout && st != protocol.StatusUnavailable) || time.Now().After(deadline) {
			return res, err
		}
		if strings.Contains(err.Error(), "went back") {
			return res, err // refused for good
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMemberRestartedFromAnOldDataDirReissuesNoToken: a member restarted
// from an old copy of its data directory (an operator restoring a
// member's disk from last night's backup) forms a quorum with a member
// that missed the last write: the cluster lost an acknowledged acquire,
// and its revision is one below the token that acquire answered. The
// process that was answered that token must not be answered it again for
// the same key: a write's revision is above every revision answered
// before it was sent, so an answer at or below one is the revision going
// back (docs/etcd.md: refused, unavailable, naming the restore), and so
// is every later call, Health's included. The refused write took effect
// (the cluster committed it before its answer was judged) and raised the
// store's revision mark to the revision it committed at, so a process
// started after it refuses the store too, naming the lost writes.
func TestMemberRestartedFromAnOldDataDirReissuesNoToken(t *testing.T) {
	c, rt := faultCluster(t, "/olddir")
	ctx := t.Context()
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("warm"), Owner: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// m2 misses what follows; m0's data directory is saved as it is now.
	c.Kill(2)
	c.Kill(0)
	backup := filepath.Join(t.TempDir(), "m0")
	if err := c.SaveData(0, backup); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := untilAnswered(t, func(ctx context.Context) (protocol.Result, error) {
		return rt.Acquire(ctx, protocol.AcquireRequest{Key: key("x"), Owner: "a", TTL: time.Minute, RequestID: "first"})
	})
	if err != nil || first.Status != protocol.StatusAcquired {
		t.Fatalf("acquire of x on m0 and m1: %v %v", first.Status, err)
	}
	// m0 and m1 acknowledged it. m1 goes; m0 comes back from its old
	// directory, with m2: a quorum that never saw the acquire.
	c.Kill(0)
	c.Kill(1)
	if err := c.LoadData(0, backup); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := untilAnswered(t, func(ctx context.Context) (protocol.Result, error) {
		return rt.Acquire(ctx, protocol.AcquireRequest{Key: key("x"), Owner: "b", TTL: time.Minute, RequestID: "second"})
	})
	if err == nil && second.Lease != nil && second.Lease.Token <= first.Lease.Token {
		t.Fatalf("acquire of x after the cluster lost the acquire that answered token %d: %s with token %d, issued again by the same process; want unavailable naming the revision going back",
			first.Lease.Token, second.Status, second.Lease.Token)
	}
	if !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "went back") || !contains(err, "data directories") {
		t.Fatalf("acquire of x after the loss: %v %v; want unavailable naming the revision going back and old data directories", second.Status, err)
	}
	if err := rt.Health(ctx); !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "went back") {
		t.Errorf("health of the process after the loss: %v; want unavailable naming the revision going back", err)
	}
	b, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/olddir"})
	if err == nil {
		_ = b.Close(context.Background())
	}
	if !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "lost acknowledged writes") || !contains(err, "--bump-revision") {
		t.Errorf("open by a process started after the loss: %v; want unavailable naming the lost writes and --bump-revision", err)
	}
}
