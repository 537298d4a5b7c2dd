package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/getspy"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestHoldHearsARevokeAfterItsWatchFailed: a holder's watch that the
// cluster ends (its member, the only one it talks to, lost the leader: the
// two others are down) signals the holder, whose read tells nothing, and
// is made again once there is a leader, so a revoke after the outage is
// heard at once. The failed watch used to be the subscription's last
// signal: the holder heard of the revoke at its next renewal, a minute
// later. A private cluster: the test kills members.
func TestHoldHearsARevokeAfterItsWatchFailed(t *testing.T) {
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	holderB, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints()[:1], Prefix: "/hold"})
	if err != nil {
		t.Fatal(err)
	}
	holder := protocol.New(holderB, nil)
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	otherB, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/hold"})
	if err != nil {
		t.Fatal(err)
	}
	other := protocol.New(otherB, nil)
	t.Cleanup(func() { _ = other.Close(context.Background()) })

	spy := getspy.New(holder)
	k := key("k")
	h, err := protocol.Hold(ctx, spy, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: 3 * time.Minute},
		&protocol.HoldConfig{RenewEvery: time.Minute, RenewTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(context.Background()); <-h.Done() }()
	select { // the read once the subscription is live
	case <-spy.Gets:
	case <-time.After(10 * time.Second):
		t.Fatal("no read after the subscription")
	}
	c.Kill(1)
	c.Kill(2)
	select { // the watch failed (no leader) and signalled: the read fails, telling nothing
	case <-spy.Gets:
	case <-time.After(30 * time.Second):
		t.Fatal("no read after member 0 lost the leader")
	}
	for _, i := range []int{1, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if h.Context().Err() != nil {
		t.Fatalf("lost before the revoke: %v", context.Cause(h.Context()))
	}
	var revoked time.Time
	for deadline := time.Now().Add(30 * time.Second); ; {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		revoked = time.Now()
		_, err := other.Revoke(rctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test"})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoke after the outage: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // the cluster's members still find the leader
	}
	select {
	case <-h.Context().Done():
		if !errors.Is(context.Cause(h.Context()), protocol.ErrNotFound) {
			t.Fatalf("the holder lost the lease with %v, want a cause matching ErrNotFound", context.Cause(h.Context()))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("revoke %v ago, after the holder's watch failed: the holder has not heard of it (renewals every minute)",
			time.Since(revoked).Round(time.Millisecond))
	}
}
