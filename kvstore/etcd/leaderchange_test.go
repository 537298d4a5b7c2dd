package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestLeaderChangeKeepsALeaseAboutItsOwnTTL: a leader change renews every
// etcd lease by its TTL, so an abandoned lease keeps its key for up to
// about another whole TTL (docs/etcd.md): its own TTL. A process holding a
// 15 s lease acquires a 2 s one that wants the same expiry second; the
// leader moves before the 2 s lease's expires_at. The 2 s lease must end
// within its TTL (plus the few seconds of etcd's rounding and the new
// leader's extension) after the change, not after the 15 s lease's TTL.
// It runs on a cluster of its own (the leader moves).
func TestLeaderChangeKeepsALeaseAboutItsOwnTTL(t *testing.T) {
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/leaderchange"})
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(b, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	const long, short = 15 * time.Second, 2 * time.Second
	// The expiry second the long lease's etcd lease was asked for: the
	// acquire read its clock between before and after.
	var second time.Time
	for i := 0; second.IsZero(); i++ {
		if i == 5 {
			t.Fatal("no acquire ran within one second of the clock")
		}
		before := time.Now()
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("long", i)), Owner: "a", TTL: long}); err != nil {
			t.Fatal(err)
		}
		if s := ceilSecond(before.Add(long)); s.Equal(ceilSecond(time.Now().Add(long))) {
			second = s
		}
	}
	// The short lease wants to expire half a second before that second.
	time.Sleep(time.Until(second.Add(-short - 500*time.Millisecond)))
	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("short"), Owner: "b", TTL: short})
	if err != nil {
		t.Fatal(err)
	}
	moveLeader(t, c)
	changed := time.Now()
	if !changed.Before(res.Lease.ExpiresAt) {
		t.Fatalf("the leader moved at %v, after the short lease's expires_at %v: nothing tested", changed, res.Lease.ExpiresAt)
	}
	deadline := changed.Add(short + 5*time.Second)
	for {
		g, err := rt.Get(ctx, protocol.GetRequest{Key: key("short")})
		if errors.Is(err, protocol.ErrNotFound) {
			t.Logf("the %v lease ended %v after the leader change", short, time.Since(changed).Round(100*time.Millisecond))
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %v lease (expires_at %v) is still %s %v after the leader change, %v past its expires_at: kept %s; want it ended within about its own TTL",
				short, res.Lease.ExpiresAt.Format(time.RFC3339Nano), g.Status, time.Since(changed).Round(100*time.Millisecond),
				time.Since(res.Lease.ExpiresAt).Round(100*time.Millisecond), etcdLeaseOf(t, c, b.Prefix()+"k/ns\x00short\x00e"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ceilSecond is t rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}

// moveLeader moves the cluster's leadership to another member and waits
// until that member leads.
func moveLeader(t *testing.T, c *etcdcluster.Cluster) {
	t.Helper()
	ctx := t.Context()
	from := c.Leader(ctx)
	if from < 0 {
		t.Fatal("no leader")
	}
	to := (from + 1) % len(c.Members)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members[from].ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := cli.Status(ctx, c.Members[to].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.MoveLeader(ctx, st.Header.MemberId); err != nil {
		t.Fatalf("move the leader from %s to %s: %v", c.Members[from].Name, c.Members[to].Name, err)
	}
	for deadline := time.Now().Add(10 * time.Second); c.Leader(ctx) != to; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s does not lead 10s after the move", c.Members[to].Name)
		}
	}
}

// etcdLeaseOf describes the etcd lease that the entry key is attached to,
// for a failure's message.
func etcdLeaseOf(t *testing.T, c *etcdcluster.Cluster, key string) string {
	cli, err := c.Client()
	if err != nil {
		return err.Error()
	}
	defer cli.Close()
	g, err := cli.Get(t.Context(), key)
	if err != nil || len(g.Kvs) == 0 {
		return fmt.Sprintf("its liveness entry unread (%v)", err)
	}
	ttl, err := cli.TimeToLive(t.Context(), clientv3.LeaseID(g.Kvs[0].Lease))
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("by etcd lease %x, granted for %ds, %ds left", g.Kvs[0].Lease, ttl.GrantedTTL, ttl.TTL)
}
