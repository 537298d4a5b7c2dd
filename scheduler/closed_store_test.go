package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// A store closed under a running worker never answers again: the worker
// takes its first closed answer as final, at once. Every lease it held is
// lost (its handler's cause and the observer's lost event matching
// ErrLeaseLost and ErrClosed), so is its membership (membership_lost),
// and Run returns, once every handler returned, an error matching
// ErrClosed: within a tenth of its TTL when the store signals its
// subscribers as it closes (the watch of a lease reads closed), within its
// next round when it does not signal; not at its leases' local deadline.
// The old scheduler took closed for "no answer": it kept its leases until
// their local deadline, then tried to join again every round, and Run
// never returned until its context ended.
func TestAClosedStoreStopsTheWorker(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		ttl    time.Duration
		bound  time.Duration
		signal bool
	}{
		// Rounds every 10s: only the watch can tell within 3s.
		{"signalled", 30 * time.Second, 3 * time.Second, true},
		// Rounds every 3s: the next round's calls tell.
		{"quiet", 9 * time.Second, 4500 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt := newStore(t)
			var store protocol.Store = rt
			if !c.signal {
				store = quietRuntime{rt}
			}
			var mu sync.Mutex
			causes := map[string]error{}
			var events []scheduler.Event
			handler := func(ctx context.Context, target string, _ int64) {
				<-ctx.Done()
				mu.Lock()
				causes[target] = context.Cause(ctx)
				mu.Unlock()
			}
			obs := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			})
			s, err := scheduler.New(store, "w1", scheduler.Static("t1", "t2"), handler,
				&scheduler.Config{TTL: c.ttl, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			eventually(t, "holds t1 and t2", holds(s, "t1", "t2"))

			if err := rt.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			closed := time.Now()
			var runErr error
			select {
			case runErr = <-done:
			case <-time.After(c.bound):
				snap := s.Snapshot()
				cancel()
				<-done
				t.Fatalf("Run did not return within %v of the store's Close (TTL %v, rounds every %v): it went on as if the store did not answer; snapshot %+v",
					c.bound, c.ttl, c.ttl/3, snap)
			}
			t.Logf("Run returned %v after the store's Close", time.Since(closed).Round(time.Millisecond))
			if !errors.Is(runErr, protocol.ErrClosed) {
				t.Errorf("Run returned %v, want an error matching protocol.ErrClosed", runErr)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, target := range []string{"t1", "t2"} {
				if cause := causes[target]; !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrClosed) {
					t.Errorf("handler of %s: cause %v, want one matching ErrLeaseLost and ErrClosed", target, cause)
				}
			}
			lost := map[string]bool{}
			for _, ev := range events {
				if (ev.Kind == scheduler.EventLost || ev.Kind == scheduler.EventMembershipLost) && errors.Is(ev.Cause, protocol.ErrClosed) {
					lost[fmt.Sprintf("%s %s", ev.Kind, ev.Target)] = true
				}
			}
			for _, want := range []string{"lost t1", "lost t2", "membership_lost "} {
				if !lost[want] {
					t.Errorf("no %q event with a cause matching ErrClosed; events: %+v", want, events)
				}
			}
			if snap := s.Snapshot(); snap.Member || len(snap.Held()) != 0 {
				t.Errorf("after Run returned: member %v, held %v; want neither", snap.Member, snap.Held())
			}
		})
	}
}
