package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// workersReadStore answers unavailable to lists of the workers' namespace
// while failList is set, and, while dropRenew is set, takes the renewals
// of membership leases into effect but answers them timeout (their
// answers lost on the way back).
type workersReadStore struct {
	protocol.Store
	failList, dropRenew atomic.Bool
}

const workersNS = scheduler.DefaultNamespace + scheduler.WorkersSuffix

func (s *workersReadStore) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	if req.Namespace == workersNS && s.failList.Load() {
		return protocol.ListResult{Status: protocol.StatusUnavailable},
			backendkit.NewError(protocol.OpList, protocol.StatusUnavailable, nil, "the test cut the workers' list off")
	}
	return s.Store.List(ctx, req)
}

func (s *workersReadStore) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := s.Store.Renew(ctx, req)
	if err == nil && req.Key.Namespace == workersNS && s.dropRenew.Load() {
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout},
			backendkit.NewError(protocol.OpRenew, protocol.StatusTimeout, context.DeadlineExceeded, "answer lost")
	}
	return res, err
}

// Snapshot.Workers counts the live workers the worker knows of: the live
// membership leases of its last read of the workers' namespace, itself only
// while it is a member. A worker whose membership lapsed while that read
// fails counts the other workers of the last read, not itself; one that is
// no member and whose lease is not listed counts only the others, none
// when there are none (its share is then every target).
func TestWorkersCountsItselfOnlyWhileMember(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{
		{Namespaces: workersNS, Delay: time.Hour}}})
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	store := &workersReadStore{Store: rt}
	ctx := context.Background()
	w2 := protocol.Key{Namespace: workersNS, Name: "w2"}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: w2, Owner: "w2", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(store, "w1", scheduler.Static("a", "b", "c", "d"), idle, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "w1 is a member beside w2", func() (bool, string) {
		snap := s.Snapshot()
		return snap.Member && snap.Workers == 2 && snap.Share == 2, snapString(snap)
	})
	// laterRound waits for a round that began after now and returns its
	// snapshot.
	laterRound := func(what string) scheduler.Snapshot {
		t.Helper()
		from := time.Now()
		var first time.Time
		eventually(t, what+": a round ends", func() (bool, string) {
			first = s.Snapshot().LastRound
			return first.After(from), snapString(s.Snapshot())
		})
		var snap scheduler.Snapshot
		eventually(t, what+": a round begins and ends", func() (bool, string) {
			snap = s.Snapshot()
			return snap.LastRound.After(first), snapString(snap)
		})
		return snap
	}
	check := func(what string, snap scheduler.Snapshot, workers, share int) {
		t.Helper()
		if snap.Member || snap.Workers != workers || snap.Share != share {
			t.Errorf("%s: %s; want no member, %d workers, share %d", what, snapString(snap), workers, share)
		}
	}

	// The membership lapses by the worker's clock (the renewals' answers
	// lost) while the workers' list cannot be read.
	store.failList.Store(true)
	store.dropRenew.Store(true)
	eventually(t, "the membership lapses", func() (bool, string) {
		snap := s.Snapshot()
		return !snap.Member, snapString(snap)
	})
	snap := laterRound("lapsed, the list failing")
	if !strings.Contains(snap.Problem, "list workers") {
		t.Fatalf("the list of the workers did not fail: %s", snapString(snap))
	}
	check("lapsed while the workers' list fails", snap, 1, 4)

	// The list answers: w1's lease is still live in the store (its
	// renewals took effect), and w2 counts it.
	store.failList.Store(false)
	check("lapsed, its lease still live", laterRound("lapsed, the list answering"), 2, 2)

	// Its lease revoked, kept from it by the lock-delay: only w2 is live.
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: protocol.Key{Namespace: workersNS, Name: "w1"}, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	check("no member, w2 live", laterRound("w1 revoked"), 1, 4)

	// No member is live: the worker knows of none.
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: w2, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	check("no member at all", laterRound("w2 revoked"), 0, 4)
}

func snapString(s scheduler.Snapshot) string {
	return fmt.Sprintf("member %v, %d workers, share %d, problem %q", s.Member, s.Workers, s.Share, s.Problem)
}
