package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// countingSubscriber counts the live subscriptions to each key of one
// namespace, and the most at once to keys of the set busy (updated by
// the test as keys leave it).
type countingSubscriber struct {
	*protocol.Runtime
	ns   string
	mu   sync.Mutex
	live map[string]int
	busy map[string]bool
	top  int
}

func (c *countingSubscriber) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	ch, cancel, err := c.Runtime.Subscribe(ctx, key)
	if err != nil || key.Namespace != c.ns {
		return ch, cancel, err
	}
	c.mu.Lock()
	c.live[key.Name]++
	c.top = max(c.top, c.busyLocked())
	c.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.mu.Lock()
			c.live[key.Name]--
			c.mu.Unlock()
		})
		cancel()
	}, nil
}

// busyLocked returns the live subscriptions to busy keys.
func (c *countingSubscriber) busyLocked() int {
	n := 0
	for k, v := range c.live {
		if c.busy[k] {
			n += v
		}
	}
	return n
}

// free takes name out of the busy set.
func (c *countingSubscriber) free(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.busy, name)
}

// counts returns the live subscriptions to busy keys, and the most at once.
func (c *countingSubscriber) counts() (live, top int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busyLocked(), c.top
}

// A worker below its share listens for the end of a few busy targets, not
// of every one (a subscription each: an advisory lock on PostgreSQL, a
// stream over HTTP), and takes one of those at once when it is released.
func TestBusyTargetsListenedToAreBounded(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	store := &countingSubscriber{Runtime: rt, ns: "bw", live: map[string]int{}, busy: map[string]bool{}}
	ctx := context.Background()
	var names []string
	tokens := map[string]int64{}
	for i := range 20 {
		name := fmt.Sprintf("t%02d", i)
		names = append(names, name)
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "bw", Name: name}, Owner: "someone", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = res.Lease.Token
		store.busy[name] = true
	}
	// Rounds every 20s: only the signal gets a target taken within the test.
	s, err := scheduler.New(store, "w", scheduler.Static(names...), idle,
		&scheduler.Config{Namespace: "bw", TTL: time.Minute, RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "w listens for some busy targets", func() (bool, string) {
		live, top := store.counts()
		return live > 0, fmt.Sprintf("%d live subscriptions, %d at most", live, top)
	})
	// Release each busy target until one w listens to is released: w takes
	// it at once. Those it does not listen to wait for its next round.
	for _, name := range names {
		store.free(name)
		if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: protocol.Key{Namespace: "bw", Name: name}, Owner: "someone", Token: tokens[name]}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && len(s.Snapshot().Held()) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if len(s.Snapshot().Held()) > 0 {
			break
		}
	}
	if held := s.Snapshot().Held(); len(held) == 0 {
		t.Fatalf("w took none of the released targets: snapshot %+v", s.Snapshot())
	}
	if live, top := store.counts(); top > 8 {
		t.Errorf("w listened for %d busy targets at once (%d now); want at most 8", top, live)
	}
}

// Config.LockDelay: "A handed-over or released target is not kept: a
// worker below its fair share that listens for its end ... takes it at
// once". a holds all four targets; b joins with rounds 20s apart, below
// its share of two, and listens for them; a, at its next round (1s), hands
// two over: b takes them then, not at its own next round.
func TestHandedOverTargetIsTakenAtOnce(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	all := scheduler.Static("h1", "h2", "h3", "h4")
	a, err := scheduler.New(store, "a", all, idle, &scheduler.Config{Namespace: "ho", TTL: time.Minute, RenewEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start(t, a)
	eventually(t, "a holds every target", holds(a, "h1", "h2", "h3", "h4"))
	rounds := make(chan scheduler.Event, 100)
	b, err := scheduler.New(store, "b", all, idle, &scheduler.Config{Namespace: "ho", TTL: time.Minute, RenewEvery: 20 * time.Second,
		Observer: scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
			if ev.Kind == scheduler.EventRound {
				rounds <- ev
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	start(t, b)
	var first scheduler.Event
	select {
	case first = <-rounds:
	case <-time.After(waitFor):
		t.Fatal("b made no round")
	}
	if first.Owned != 0 || first.Share != 2 {
		t.Fatalf("b's first round: owned %d, share %d; want none of a share of 2 (a holds every target)", first.Owned, first.Share)
	}
	const within = 15 * time.Second // under b's next round (18s at the earliest)
	began := time.Now()
	for time.Since(began) < within {
		if len(b.Snapshot().Held()) == 2 {
			t.Logf("b holds its share %v after its first round", time.Since(began))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("b did not take its share of 2 within %v of its first round: %+v; a: %+v", within, b.Snapshot(), a.Snapshot())
}
