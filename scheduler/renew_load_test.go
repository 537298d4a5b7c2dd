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

// slowRenewals passes calls to a store, but answers each renewal delay
// late (a store that struggles but answers; a renewal whose context ends
// first answers timeout then), and counts the renewals in flight.
type slowRenewals struct {
	protocol.Store
	delay    time.Duration
	mu       sync.Mutex
	inFlight int
	most     int // the most renewals in flight at once
	renewed  int // renewals that succeeded
}

func (s *slowRenewals) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	wait := time.NewTimer(s.delay)
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-ctx.Done():
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout},
			&protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout, Key: req.Key, Message: "the store is slow", Err: ctx.Err()}
	}
	res, err := s.Store.Renew(ctx, req)
	if err == nil {
		s.mu.Lock()
		s.renewed++
		s.mu.Unlock()
	}
	return res, err
}

func (s *slowRenewals) counts() (most, renewed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most, s.renewed
}

// A store that answers every renewal a bit later than OpTimeout (slow,
// not hung) gets the renewals of every lease plus a bounded number of
// extra ones (Config.ExtraRenewals, over all leases), not several per
// lease: the extra renewals sent beside one without an answer are a
// safety net for a hung renewal (TestHungRenewalIsTriedAgainWhileTheLeaseHasTimeLeft),
// and must not multiply the load on a store that is struggling. The
// leases are kept: the slow answers land in time.
func TestSlowStoreGetsABoundedNumberOfExtraRenewals(t *testing.T) {
	t.Parallel()
	const (
		targets   = 16
		opTimeout = 400 * time.Millisecond
		// extras is the default of Config.ExtraRenewals.
		extras = 4
	)
	store := &slowRenewals{Store: newStore(t), delay: opTimeout * 3 / 2}
	var names []string
	for i := range targets {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	var mu sync.Mutex
	var lost []string
	s, err := scheduler.New(store, "w1", scheduler.Static(names...), func(ctx context.Context, target string, _ int64) {
		<-ctx.Done()
		if cause := context.Cause(ctx); cause != scheduler.ErrStopped {
			mu.Lock()
			lost = append(lost, fmt.Sprintf("%s: %v", target, cause))
			mu.Unlock()
		}
	}, &scheduler.Config{TTL: ttl, RenewEvery: ttl / 3, OpTimeout: opTimeout})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, s)
	eventually(t, "holds every target", holds(s, names...))
	// Three rounds of renewals (every lease and the membership), each
	// answered 1.5 OpTimeouts late.
	eventually(t, "three rounds of renewals answered", func() (bool, string) {
		_, renewed := store.counts()
		return renewed >= 3*(targets+1), fmt.Sprint(renewed, " renewals answered")
	})
	stop()
	most, _ := store.counts()
	if bound := targets + 1 + extras; most > bound {
		t.Errorf("%d renewals in flight at once on a store answering each 1.5 OpTimeouts late, for %d leases and the membership; "+
			"want at most %d: one each, and %d extra over all (ExtraRenewals)", most, targets, bound, extras)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("leases lost on a store that answers every renewal in time, if late: %v", lost)
	}
}
