package schedulertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// memberRenewals passes calls to a store and notes when each renewal of a
// membership lease that the store renewed was sent.
type memberRenewals struct {
	protocol.Store
	mu   sync.Mutex
	last time.Time
}

func (m *memberRenewals) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	began := time.Now()
	res, err := m.Store.Renew(ctx, req)
	if err == nil && strings.HasSuffix(req.Key.Namespace, scheduler.WorkersSuffix) {
		m.mu.Lock()
		m.last = began
		m.mu.Unlock()
	}
	return res, err
}

// lastSent returns when the last renewal of a membership lease that the
// store renewed was sent.
func (m *memberRenewals) lastSent() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Timing of the lapse case: rounds every 1.25 s (±10%) and a TTL of 3 s,
// so that the membership's local deadline, TTL after the last renewal
// sent before the cut, falls between two rounds: the second after the cut
// comes at most 2.75 s after it, the third at least 3.375 s after it. A
// worker that noticed the lapse only at a round would notice it at least
// lapseRounds late.
const (
	lapseTTL    = 3 * time.Second
	lapseRenew  = 1250 * time.Millisecond
	lapseRounds = 375 * time.Millisecond
	// lapseMargin is what the case allows between the membership's local
	// deadline and the snapshot saying the worker is no member: a timer
	// and a lock on a loaded machine.
	lapseMargin = lapseRounds / 2
)

// testMembershipLapses: a worker cut off from the store (every call
// answers unavailable at once) right after a round no longer counts itself
// a member once its membership lease's local deadline (TTL after its last
// renewal was sent) has passed, as its target leases are lost then by the
// local clock: by then the store may judge the lease run out and the
// other workers no longer count it. It does not wait for its next round to
// notice (unless a timer of the test process woke up more than lateCall
// late: then that is logged). Once the store answers again it joins again
// and takes its targets back.
func testMembershipLapses(t *testing.T, newHarness Factory) {
	const ns = "lapse"
	h := newHarness(t)
	renewals := &memberRenewals{Store: h.NewStore(t)}
	fault := &faultStore{Store: renewals}
	t.Cleanup(func() { _ = renewals.Close(context.Background()) })
	var (
		mu   sync.Mutex
		lost = map[string]time.Time{} // target -> when its handler's context ended with a loss
	)
	handler := func(ctx context.Context, target string, _ int64) {
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), protocol.ErrLeaseLost) {
			mu.Lock()
			lost[target] = time.Now()
			mu.Unlock()
		}
	}
	rounds := make(chan struct{}, 1)
	observer := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		if ev.Kind == scheduler.EventRound {
			select {
			case rounds <- struct{}{}:
			default:
			}
		}
	})
	sched := runOne(t, fault, scheduler.Static("a", "b"), handler,
		&scheduler.Config{Namespace: ns, TTL: lapseTTL, RenewEvery: lapseRenew, Observer: observer})
	waitUntil(t, "the worker is a member and holds a and b", converge, func() bool {
		snap := sched.Snapshot()
		return snap.Member && fmt.Sprint(snap.Held()) == "[a b]"
	})
	// Cut the worker off right after one of its full rounds ended (its
	// membership renewed in it): the deadline then falls between two
	// rounds.
	sentBefore := renewals.lastSent()
	waitUntil(t, "a round renews the membership", converge, func() bool {
		select {
		case <-rounds:
			return renewals.lastSent().After(sentBefore)
		default:
			return false
		}
	})
	probe := startLatenessProbe()
	defer probe.close()
	fault.drop()
	cut := time.Now()
	waitUntil(t, "the worker no longer counts itself a member", converge, func() bool { return !sched.Snapshot().Member })
	noticed := time.Now()
	// The scheduler read its clock before it sent the renewal: its local
	// deadline is at the latest TTL after the store was called.
	deadline := renewals.lastSent().Add(lapseTTL)
	mu.Lock()
	t.Logf("membership's local deadline %v after the cut; the worker no longer counted itself a member %v after it; its targets were lost %v after it",
		deadline.Sub(cut).Round(time.Millisecond), noticed.Sub(deadline).Round(time.Millisecond), lossTimes(lost, deadline))
	mu.Unlock()
	if late := noticed.Sub(deadline); late > lapseMargin {
		if timer := probe.worst(deadline, noticed); timer > lateCall {
			t.Logf("not failed: a %v timer of this process woke up %v late meanwhile (more than %v): the machine is too loaded",
				latenessTick, timer.Round(time.Millisecond), lateCall)
		} else {
			t.Errorf("the worker counted itself a member %v after its membership lease's local deadline passed unrenewed, the store not answering; want within %v (a worker that waits for its next round is at least %v late)",
				late.Round(time.Millisecond), lapseMargin, lapseRounds)
		}
	}
	fault.reconnect()
	waitUntil(t, "the worker joins again and holds a and b once the store answers", converge, func() bool {
		snap := sched.Snapshot()
		return snap.Member && fmt.Sprint(snap.Held()) == "[a b]"
	})
}

// lossTimes says when each lost target's handler heard of the loss,
// relative to from.
func lossTimes(lost map[string]time.Time, from time.Time) string {
	var parts []string
	for _, target := range []string{"a", "b"} {
		if at, ok := lost[target]; ok {
			parts = append(parts, fmt.Sprintf("%s %v", target, at.Sub(from).Round(time.Millisecond)))
		} else {
			parts = append(parts, target+" not yet")
		}
	}
	return strings.Join(parts, ", ")
}
