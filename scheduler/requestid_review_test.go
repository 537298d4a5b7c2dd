package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/scheduler"
)

// scheduler.New takes any protocol.Store. Its acquires and releases carry
// request ids of its own; its renewals carry none. Over a Store that makes
// none (a bare backend: every *Backend has a Store's methods), the second
// renewal under the empty id is a reuse of the first's with other
// parameters, answered invalid (or, for one lease, a replay that extends
// nothing): the worker loses every lease at its first TTL and, the renew
// of its lapsed membership refused the same way each round, never joins
// again.
func TestSchedulerKeepsItsLeasesOnAStoreThatMakesNoRequestIDs(t *testing.T) {
	store := memstore.New(nil)
	var mu sync.Mutex
	var causes []error
	s, err := scheduler.New(store, "w1", scheduler.Static("t1", "t2"), func(ctx context.Context, target string, token int64) {
		<-ctx.Done()
		mu.Lock()
		causes = append(causes, context.Cause(ctx))
		mu.Unlock()
	}, &scheduler.Config{TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(1200 * time.Millisecond) // four TTLs
	snap := s.Snapshot()
	mu.Lock()
	lost := append([]error(nil), causes...)
	mu.Unlock()
	cancel()
	<-done
	if len(lost) > 0 || !snap.Member || len(snap.Owned) != 2 {
		t.Fatalf("alone on a store with two targets, after four TTLs the worker is member=%v owning %d targets, its handlers ended with %v; "+
			"want a member owning both, no handler ended (last problem: %q)", snap.Member, len(snap.Owned), lost, snap.Problem)
	}
}
