//go:build unix

package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/getspy"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestCallsCutByTheWatchProberRetryElsewhere: the member of a holder's
// watch stalls just past the prober's threshold (SIGSTOP for 5s: a
// healthy member too loaded to answer a progress request for 3s) while
// acquires are in flight on every member. The prober closes that member's
// connections (frozen.go); the calls then in flight on it must go on on
// the members that answer, not fail with unavailable.
func TestCallsCutByTheWatchProberRetryElsewhere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	var peers watchPeers
	b, err := etcd.Open(ctx, etcd.WithDialOptions(&etcd.Config{Endpoints: c.Endpoints(), Prefix: "/false-alarm/"}, peers.option()))
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(b, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	spy := getspy.New(rt)
	h, err := protocol.Hold(ctx, spy, protocol.AcquireRequest{Key: key("held"), Owner: "w1", TTL: 3 * time.Minute},
		&protocol.HoldConfig{RenewEvery: time.Minute, RenewTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Release(context.Background()); <-h.Done() })
	select { // the read once the subscription (and so the prober) is live
	case <-spy.Gets:
	case <-time.After(10 * time.Second):
		t.Fatal("no read after the subscription")
	}
	stalled := memberAt(c, peers.last())
	if stalled < 0 {
		t.Fatalf("the holder's watch is on %q, no member's address %v: nothing tested", peers.last(), c.Endpoints())
	}
	c.Pause(stalled)
	resumed := sync.OnceFunc(func() { c.Resume(stalled) })
	t.Cleanup(resumed)
	const calls = 9
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, errs[i] = rt.Acquire(actx, protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i)), Owner: "w",
				TTL: time.Minute, RequestID: fmt.Sprintf("acquire-%d", i)})
		})
	}
	time.Sleep(5 * time.Second) // past notifyFrozen (3s) and the prober's tick
	resumed()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("acquire %d, in flight while member %d (the watch's) stalled 5s: %v; want it answered by the members that answer", i, stalled, err)
		}
	}
}
