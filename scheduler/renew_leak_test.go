package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// blockingRenewals passes calls to a store, but once armed, renewals of
// target t's lease block until their context ends (all of them, or only
// the first with first set), then go on for linger more, ignoring that
// end, before they answer timeout. It counts the renewals under way (of
// every lease) and notes why each blocked one ended.
type blockingRenewals struct {
	protocol.Store
	first  bool
	linger time.Duration
	mu     sync.Mutex
	armed  bool
	// blocked counts the renewals of t that blocked; blocking those still
	// waiting for their context's end.
	blocked, blocking int
	inFlight          int
	ends              []error // why each blocked renewal's context ended
	renewed           bool    // a renewal of t succeeded after one blocked
}

func (s *blockingRenewals) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

func (s *blockingRenewals) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	s.mu.Lock()
	s.inFlight++
	block := s.armed && req.Key.Namespace == scheduler.DefaultNamespace && req.Key.Name == "t" && (!s.first || s.blocked == 0)
	if block {
		s.blocked++
		s.blocking++
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if !block {
		res, err := s.Store.Renew(ctx, req)
		if err == nil && req.Key.Name == "t" {
			s.mu.Lock()
			s.renewed = s.renewed || s.blocked > 0
			s.mu.Unlock()
		}
		return res, err
	}
	<-ctx.Done()
	s.mu.Lock()
	s.blocking--
	s.ends = append(s.ends, ctx.Err())
	s.mu.Unlock()
	time.Sleep(s.linger)
	return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout},
		&protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout, Key: req.Key, Message: "blocked", Err: ctx.Err()}
}

// state returns what the store saw, under its lock.
func (s *blockingRenewals) state() (blocked, blocking, inFlight int, ends []error, renewed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked, s.blocking, s.inFlight, append([]error(nil), s.ends...), s.renewed
}

// Renewals still under way when the worker stops end before Run returns
// (Run returns only once no store call of the worker is under way, so
// that the store may be closed then), and no goroutine of the worker is
// left: renewals that block until their context ends, when the stop comes
// while two of one lease wait (the first and the extra one beside it),
// are cut short by the stop, not left to their deadline; a renewal that
// ignores its context's end for a while (left behind by a later one of
// its lease that succeeded) is waited for. Not parallel: goleak looks at
// every goroutine of the process.
func TestStopEndsTheRenewalsUnderWay(t *testing.T) {
	for _, c := range []struct {
		name  string
		store *blockingRenewals
		// stopWhen says when to stop the worker.
		stopWhen func(blocked, blocking int, renewed bool) bool
	}{
		{"renewals block until their context ends", &blockingRenewals{},
			func(_, blocking int, _ bool) bool { return blocking >= 2 }},
		{"a renewal ignores its context's end for a while", &blockingRenewals{first: true, linger: ttl * 2 / 3},
			func(blocked, blocking int, renewed bool) bool { return blocked == 1 && blocking == 0 && renewed }},
	} {
		t.Run(c.name, func(t *testing.T) {
			leaks := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // last, after the store's close
			store := c.store
			store.Store = newStore(t)
			s, err := scheduler.New(store, "w1", scheduler.Static("t"), idle, &scheduler.Config{TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, s)
			eventually(t, "holds t", holds(s, "t"))
			store.arm()
			eventually(t, "t's renewals where the worker is stopped", func() (bool, string) {
				blocked, blocking, _, _, renewed := store.state()
				return c.stopWhen(blocked, blocking, renewed), fmt.Sprintf("%d renewals of t blocked, %d still blocking; renewed after: %v", blocked, blocking, renewed)
			})
			stop()
			_, _, inFlight, ends, _ := store.state()
			if inFlight != 0 {
				t.Errorf("%d renewals under way when Run returned; want none (the store may be closed then)", inFlight)
			}
			for _, end := range ends {
				if !errors.Is(end, context.Canceled) {
					t.Errorf("a blocked renewal ended by %v; want it cut short by the renewal that succeeded or by the stop (context.Canceled)", end)
				}
			}
		})
	}
}
