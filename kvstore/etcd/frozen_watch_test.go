//go:build unix

package etcd_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/getspy"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// watchPeers is a gRPC stream interceptor that records the address of the
// member each etcd Watch stream of a client was opened on, latest last.
type watchPeers struct {
	mu    sync.Mutex
	addrs []string
}

func (w *watchPeers) option() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err == nil && method == "/etcdserverpb.Watch/Watch" {
			if p, ok := peer.FromContext(cs.Context()); ok {
				w.mu.Lock()
				w.addrs = append(w.addrs, p.Addr.String())
				w.mu.Unlock()
			}
		}
		return cs, err
	})
}

func (w *watchPeers) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.addrs) == 0 {
		return ""
	}
	return w.addrs[len(w.addrs)-1]
}

// memberAt returns the index of the member of c whose client address
// (host:port) is addr, or -1.
func memberAt(c *etcdcluster.Cluster, addr string) int {
	for i, ep := range c.Endpoints() {
		if u, err := url.Parse(ep); err == nil && u.Host == addr {
			return i
		}
	}
	return -1
}

// TestHoldHearsARevokeWhileItsWatchMemberIsFrozen: a holder talks to every
// member; the member its watch of the key lives on freezes (SIGSTOP: a
// paused VM, a network that drops its packets; its connections stay open
// and nothing on them is answered), and another process revokes the lease
// through the two members that still form the cluster. A killed member's
// connections close and the watch is made again on another member at
// once; a frozen one's stay open, and the holder heard nothing until the
// client's keepalive gave up on the connection. Loss is heard at once
// (DESIGN.md; docs/holding.md: within 5 s, renewals far apart): the
// holder must hear the revoke within 5 s, not at a renewal.
func TestHoldHearsARevokeWhileItsWatchMemberIsFrozen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	var peers watchPeers
	holderB, err := etcd.Open(ctx, etcd.WithDialOptions(&etcd.Config{Endpoints: c.Endpoints(), Prefix: frozenPrefix}, peers.option()))
	if err != nil {
		t.Fatal(err)
	}
	if took, frozen := revokeWhileWatchMemberFrozen(t, c, holderB, &peers); took > 5*time.Second {
		t.Fatalf("revoke through the healthy members, while the member of the holder's watch (member %d) is frozen: "+
			"the holder heard of it after %v; want at once (within 5s)", frozen, took.Round(100*time.Millisecond))
	}
}

// TestNewWithKeepAliveHearsARevokeWhileItsWatchMemberIsFrozen: a store on
// a client the caller owns (New) does not close a frozen member's
// connections (that is Open's, whose client is its own): the client's
// keepalive bounds how late its holder hears a revoke while the member of
// its watch is frozen. docs/etcd.md says so and advises Open's settings,
// DialKeepAliveTime 10s and DialKeepAliveTimeout 5s: with them the holder
// must hear the revoke within 20 s. (With clientv3's default, no
// keepalive, it heard nothing within 90 s, TTL 3 min, renewals every
// minute.)
func TestNewWithKeepAliveHearsARevokeWhileItsWatchMemberIsFrozen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	var peers watchPeers
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 5 * time.Second, DialOptions: []grpc.DialOption{peers.option()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() }) // after the store's Close
	holderB, err := etcd.New(ctx, cli, &etcd.Config{Prefix: frozenPrefix})
	if err != nil {
		t.Fatal(err)
	}
	if took, frozen := revokeWhileWatchMemberFrozen(t, c, holderB, &peers); took > 20*time.Second {
		t.Fatalf("revoke through the healthy members, while the member of the watch of a holder on a client with keepalive 10s+5s "+
			"(member %d) is frozen: the holder heard of it after %v; want within 20s", frozen, took.Round(100*time.Millisecond))
	}
}

// frozenPrefix is the store of the frozen-member tests, each on a cluster
// of its own.
const frozenPrefix = "/frozen-watch/"

// revokeWhileWatchMemberFrozen holds a lease through holderB (TTL 3 min,
// renewals every minute), whose client peers records the watch streams
// of, freezes the member of the holder's watch, revokes the lease through
// the two others, and returns how long after the revoke the holder heard
// of it (failing after 40 s) and the frozen member.
func revokeWhileWatchMemberFrozen(t *testing.T, c *etcdcluster.Cluster, holderB *etcd.Backend, peers *watchPeers) (time.Duration, int) {
	t.Helper()
	ctx := t.Context()
	holder := protocol.New(holderB, nil)
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	spy := getspy.New(holder)
	k := key("k")
	h, err := protocol.Hold(ctx, spy, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: 3 * time.Minute},
		&protocol.HoldConfig{RenewEvery: time.Minute, RenewTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Release(context.Background()); <-h.Done() })
	select { // the read once the subscription is live
	case <-spy.Gets:
	case <-time.After(10 * time.Second):
		t.Fatal("no read after the subscription")
	}
	frozen := memberAt(c, peers.last())
	if frozen < 0 {
		t.Fatalf("the holder's watch is on %q, no member's address %v: nothing tested", peers.last(), c.Endpoints())
	}
	var healthy []string
	for i, ep := range c.Endpoints() {
		if i != frozen {
			healthy = append(healthy, ep)
		}
	}
	c.Pause(frozen)
	t.Cleanup(func() { c.Resume(frozen) }) // before the holder's Close and Stop

	// The two others elect a leader when the frozen one led: open and
	// revoke again until they answer.
	var otherB *etcd.Backend
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		otherB, err = etcd.Open(octx, &etcd.Config{Endpoints: healthy, Prefix: frozenPrefix})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("open through the two members that are not frozen: %v", err)
		}
	}
	other := protocol.New(otherB, nil)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	_, err = untilAnswered(t, func(ctx context.Context) (protocol.Result, error) {
		return other.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test", RequestID: "revoke"})
	})
	if err != nil {
		t.Fatalf("revoke through the two members that are not frozen: %v", err)
	}
	revoked := time.Now()
	select {
	case <-h.Context().Done():
	case <-time.After(40 * time.Second):
		t.Fatalf("revoke through the healthy members 40s ago, while the member of the holder's watch (member %d) is frozen: "+
			"the holder has not heard of it (renewals every minute)", frozen)
	}
	took := time.Since(revoked)
	if !errors.Is(context.Cause(h.Context()), protocol.ErrNotFound) {
		t.Errorf("the holder lost the lease with %v; want a cause matching ErrNotFound (the revoke)", context.Cause(h.Context()))
	}
	t.Logf("heard after %v", took.Round(time.Millisecond))
	return took, frozen
}
