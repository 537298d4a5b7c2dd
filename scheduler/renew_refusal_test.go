package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// slowMembershipRenew is a store that cannot signal (no Notifier) and
// whose renewals of the membership lease, once hold is set, wait until
// their context ends; it tells when one started and what probe answered
// (whether the target's handler was cancelled, or the observer heard of
// it) by the time it ended.
type slowMembershipRenew struct {
	protocol.Store
	hold    chan struct{} // closed: hold the membership's renewals
	started chan struct{} // one per held renewal
	ended   chan error    // per held renewal: what probe answered by then
	probe   func() error
}

func (s *slowMembershipRenew) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	select {
	case <-s.hold:
		if req.Key.Namespace == "scheduler"+scheduler.WorkersSuffix {
			select {
			case s.started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			select {
			case s.ended <- s.probe():
			default: // the test has its answer
			}
		}
	default:
	}
	return s.Store.Renew(ctx, req)
}

// A renewal the store refuses cancels that handler at once (docs/scheduler.md:
// "A renewal the store refuses ... cancels that handler at once"), not when
// the slowest renewal of the round has returned: on a store that cannot
// signal the revoke, t's renewal answers not_found while the membership's
// renewal of the same round waits, and t's handler must be cancelled with
// that not_found before the slow renewal ends (which it may do as late as
// the leases' local deadline, when t would be lost by the clock anyway).
func TestRefusedRenewalIsNotHeldUpByASlowRenewal(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	handlerCtx := make(chan context.Context, 1)
	store := &slowMembershipRenew{Store: rt, hold: make(chan struct{}), started: make(chan struct{}, 10), ended: make(chan error, 10)}
	store.probe = func() error {
		ctx := <-handlerCtx
		handlerCtx <- ctx
		return context.Cause(ctx)
	}
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		handlerCtx <- ctx
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	if _, err := rt.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	close(store.hold)
	<-store.started
	if cause := <-store.ended; !errors.Is(cause, protocol.ErrNotFound) {
		t.Errorf("when the membership's slow renewal ended, the revoked t's handler had cause %v; want it cancelled by its renewal's not_found, which came first", cause)
	} else if strings.Contains(cause.Error(), "lease: lost: lease: ") {
		t.Errorf("the cause reads %q; want \"lease: \" once before the reason, as a Held's cause reads", cause)
	}
}

// The observer hears of a refused renewal when the handler is cancelled,
// not at the end of the renewal round (behind its slow renewals), and
// hears it once: as in TestRefusedRenewalIsNotHeldUpByASlowRenewal, t's
// renewal answers not_found while the membership's renewal of the same
// round waits.
func TestRefusedRenewalIsObservedAtOnce(t *testing.T) {
	t.Parallel()
	rt := newStore(t)
	var mu sync.Mutex
	var token int64  // t's first lease
	var lost []error // the causes of the lost events of that lease
	obs := scheduler.ObserverFunc(func(_ context.Context, ev scheduler.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Kind == scheduler.EventLost && ev.Target == "t" && ev.Token == token {
			lost = append(lost, ev.Cause)
		}
	})
	store := &slowMembershipRenew{Store: rt, hold: make(chan struct{}), started: make(chan struct{}, 10), ended: make(chan error, 10)}
	store.probe = func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(lost) == 0 {
			return errors.New("no lost event")
		}
		return nil
	}
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, tok int64) {
		mu.Lock()
		if token == 0 {
			token = tok
		}
		mu.Unlock()
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	eventually(t, "t's handler runs", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return token != 0, "no handler call"
	})
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	if _, err := rt.Revoke(context.Background(), protocol.RevokeRequest{Key: key, Actor: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	close(store.hold)
	<-store.started
	if err := <-store.ended; err != nil {
		t.Errorf("when the membership's slow renewal ended, the observer had heard %v of the revoked t; want the lost event sent when t's handler was cancelled", err)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || !errors.Is(lost[0], protocol.ErrNotFound) {
		t.Errorf("lost events of t's lease: %s; want one, with the renewal's not_found", fmt.Sprint(lost))
	}
}
