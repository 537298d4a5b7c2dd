package scheduler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasestore/leasestore/scheduler"
)

// A worker whose Targets function fails from its start (a configuration
// service down when it boots) has no set: it claims nothing. It must not
// count as a live worker meanwhile, or the others keep to a share that
// leaves targets unworked while they are free: here a, alone able to
// work, holds 2 of 4 targets for as long as b's Targets fails.
func TestAWorkerWithoutATargetSetLeavesNoTargetUnworked(t *testing.T) {
	store := newStore(t)
	all := scheduler.Static("x1", "x2", "x3", "x4")
	a, err := scheduler.New(store, "a", all, idle, &scheduler.Config{Namespace: "noset", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	failing := func(context.Context) ([]string, error) { return nil, errors.New("config service unavailable") }
	b, err := scheduler.New(store, "b", failing, idle, &scheduler.Config{Namespace: "noset", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, b)
	// (The review's version waited here for b to be a member: a worker
	// without a target set no longer joins, so b made a round instead.)
	eventually(t, "b made a round without a target set", func() (bool, string) {
		snap := b.Snapshot()
		return !snap.LastRound.IsZero(), snap.Problem
	})
	if snap := b.Snapshot(); snap.Member {
		t.Errorf("b joined without a target set: %+v", snap)
	}
	start(t, a)
	eventually(t, "a works every target while b has none to work", holds(a, "x1", "x2", "x3", "x4"))
}
