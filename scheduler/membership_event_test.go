package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// quietRuntime is a store that does not signal (no Notifier): a worker
// learns of the revoke of its membership from its next renewal.
type quietRuntime struct{ protocol.Store }

// A worker that loses its membership lease tells its observer, as it
// does of every other change of its state: EventMembershipLost
// ("membership_lost") with the lease's token and a cause matching
// ErrLeaseLost, whether the store signalled the revoke, a renewal was
// refused, or the lease was not renewed before it would run out by the
// worker's clock. It told nothing.
func TestMembershipLossIsObserved(t *testing.T) {
	t.Parallel()
	if scheduler.EventMembershipLost != "membership_lost" { // a metric's label
		t.Fatalf("EventMembershipLost is %q, want membership_lost", scheduler.EventMembershipLost)
	}
	member := protocol.Key{Namespace: scheduler.DefaultNamespace + scheduler.WorkersSuffix, Name: "w1"}
	for _, c := range []struct {
		name  string
		store func(t *testing.T, rt *protocol.Runtime) (protocol.Store, func())
		cause error // besides ErrLeaseLost
	}{
		{"revoke signalled", func(t *testing.T, rt *protocol.Runtime) (protocol.Store, func()) {
			return rt, func() { revoke(t, rt, member) }
		}, protocol.ErrNotFound},
		{"renewal refused", func(t *testing.T, rt *protocol.Runtime) (protocol.Store, func()) {
			return quietRuntime{rt}, func() { revoke(t, rt, member) }
		}, protocol.ErrNotFound},
		{"lapsed by the local clock", func(t *testing.T, rt *protocol.Runtime) (protocol.Store, func()) {
			s := &dropRenewStore{Store: rt}
			return s, func() { s.drop.Store(true) }
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt := newStore(t)
			store, lose := c.store(t, rt)
			var mu sync.Mutex
			var lost []scheduler.Event
			obs := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
				if ev.Kind == scheduler.EventMembershipLost {
					mu.Lock()
					lost = append(lost, ev)
					mu.Unlock()
				}
			})
			s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: ttl, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			start(t, s)
			eventually(t, "joins and holds t", holds(s, "t"))
			res, err := rt.Get(context.Background(), protocol.GetRequest{Key: member})
			if err != nil {
				t.Fatal(err)
			}
			token := res.Lease.Token
			lose()
			eventually(t, "a membership_lost event", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				return len(lost) > 0, fmt.Sprintf("snapshot %+v", s.Snapshot())
			})
			mu.Lock()
			ev := lost[0]
			mu.Unlock()
			if ev.Worker != "w1" || ev.Namespace != scheduler.DefaultNamespace || ev.Target != "" || ev.Token != token {
				t.Errorf("event %+v, want worker w1, namespace %s, no target, token %d", ev, scheduler.DefaultNamespace, token)
			}
			if !errors.Is(ev.Cause, protocol.ErrLeaseLost) || (c.cause != nil && !errors.Is(ev.Cause, c.cause)) {
				t.Errorf("cause %v, want one matching ErrLeaseLost (and %v)", ev.Cause, c.cause)
			}
		})
	}
}

func revoke(t *testing.T, rt *protocol.Runtime, key protocol.Key) {
	t.Helper()
	if _, err := rt.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
}
