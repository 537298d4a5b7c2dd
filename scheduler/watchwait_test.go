package scheduler_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// heldGets is a store whose gets of target t block (whatever their
// context says) while hold is set, until gate closes: a slow store call
// of the watch that listens for the end of t's lease.
type heldGets struct {
	*protocol.Runtime
	hold     atomic.Bool
	gate     chan struct{}
	inflight atomic.Int32
}

func (h *heldGets) Get(ctx context.Context, r protocol.GetRequest) (protocol.Result, error) {
	if h.hold.Load() && r.Key.Name == "t" && r.Key.Namespace == scheduler.DefaultNamespace {
		h.inflight.Add(1)
		defer h.inflight.Add(-1)
		<-h.gate
	}
	return h.Runtime.Get(ctx, r)
}

// Run returns only once every goroutine it started for a lease has
// ended, the watches of target leases included (it waited for the
// membership's watch alone): a caller that closes the store once Run
// returned must not meet a watch still calling it.
func TestRunWaitsForItsLeaseWatches(t *testing.T) {
	t.Parallel()
	store := &heldGets{Runtime: newStore(t), gate: make(chan struct{})}
	store.hold.Store(true)
	release := sync.OnceFunc(func() { close(store.gate) })
	t.Cleanup(release)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	eventually(t, "holds t", holds(s, "t"))
	eventually(t, "the watch of t's lease reads the key", func() (bool, string) {
		return store.inflight.Load() == 1, "no get of t in flight"
	})
	cancel()
	select {
	case err := <-done:
		if n := store.inflight.Load(); err != nil || n != 0 {
			t.Fatalf("Run returned (%v) while %d watch of its lease was still calling the store", err, n)
		}
	case <-time.After(3 * time.Second):
		release() // the watch's call ends: Run may return now
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}
