package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/scheduler"
)

// Config.LockDelay says "A handed-over or released target is taken at
// once". Worker a holds the one target and b, a member with a free slot,
// waits for it; a stops (its lease is released) right after one of b's
// rounds. b should take the released target at once, not at a round
// about RenewEvery (here 20 s) later, or after its back-off from the
// conflict it met while a held it.
func TestReleasedTargetIsTakenAtOnce(t *testing.T) {
	store := newStore(t)
	cfg := func(obs scheduler.Observer) *scheduler.Config {
		return &scheduler.Config{Namespace: "rel", TTL: time.Minute, RenewEvery: 20 * time.Second, Observer: obs}
	}
	a, err := scheduler.New(store, "a", scheduler.Static("x"), idle, cfg(nil))
	if err != nil {
		t.Fatal(err)
	}
	stopA := start(t, a)
	eventually(t, "a holds x", holds(a, "x"))
	rounds := make(chan scheduler.Event, 100)
	b, err := scheduler.New(store, "b", scheduler.Static("x"), idle, cfg(scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		if ev.Kind == scheduler.EventRound {
			rounds <- ev
		}
	})))
	if err != nil {
		t.Fatal(err)
	}
	start(t, b)
	select {
	case <-rounds: // b's first round: a member, share 1, x busy
	case <-time.After(waitFor):
		t.Fatal("b made no round")
	}
	stopA()
	released := time.Now()
	const within = 8 * time.Second
	for time.Since(released) < within {
		if len(b.Snapshot().Held()) == 1 {
			t.Logf("b took x %v after a released it", time.Since(released))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	snap := b.Snapshot()
	t.Fatalf("b, a member holding nothing (share %d, %d workers), did not take the released target within %v: owned %+v, problem %q",
		snap.Share, snap.Workers, within, snap.Owned, snap.Problem)
}
