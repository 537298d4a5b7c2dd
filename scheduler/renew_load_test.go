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
		extras    = scheduler.DefaultExtraRenewals // Config.ExtraRenewals
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

// hangsFirstRenewals passes calls to a store, but once armed, the first
// renewal of each target lease waits until its context ends and answers
// timeout (renewals on a broken connection); the later ones answer after
// a pause of slow.
type hangsFirstRenewals struct {
	protocol.Store
	slow    time.Duration
	mu      sync.Mutex
	armed   bool
	hung    map[string]bool // targets whose renewal hung
	renewed map[string]bool // targets renewed after theirs hung
}

func (s *hangsFirstRenewals) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

func (s *hangsFirstRenewals) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if req.Key.Namespace != scheduler.DefaultNamespace {
		return s.Store.Renew(ctx, req)
	}
	s.mu.Lock()
	hang := s.armed && !s.hung[req.Key.Name]
	if hang {
		s.hung[req.Key.Name] = true
	}
	after := s.hung[req.Key.Name]
	s.mu.Unlock()
	if hang {
		<-ctx.Done()
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout},
			&protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout, Key: req.Key, Message: "the deadline passed", Err: ctx.Err()}
	}
	if after {
		time.Sleep(s.slow)
	}
	res, err := s.Store.Renew(ctx, req)
	if err == nil && after {
		s.mu.Lock()
		s.renewed[req.Key.Name] = true
		s.mu.Unlock()
	}
	return res, err
}

// Twice as many renewals hanging at once as the budget of extra renewals
// (Config.ExtraRenewals) all get their extra renewal in time, each extra
// one taking a while (a tenth of OpTimeout): a renewal due one while the
// budget is spent sends it as soon as a place comes free (an extra
// renewal that answers), not an OpTimeout later, when with the default
// OpTimeout the lease would have run out.
func TestHungRenewalsBeyondTheBudgetAreAllTriedAgain(t *testing.T) {
	t.Parallel()
	targets := 2 * scheduler.DefaultExtraRenewals
	store := &hangsFirstRenewals{Store: newStore(t), slow: ttl / 30, hung: map[string]bool{}, renewed: map[string]bool{}}
	var names []string
	for i := range targets {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	var mu sync.Mutex
	ctxs := map[string]context.Context{}
	s, err := scheduler.New(store, "w1", scheduler.Static(names...), func(ctx context.Context, target string, _ int64) {
		mu.Lock()
		ctxs[target] = ctx
		mu.Unlock()
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds every target", holds(s, names...))
	eventually(t, "every handler runs", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(ctxs) == targets, fmt.Sprint(len(ctxs), " handlers")
	})
	store.arm()
	eventually(t, "every lease renewed after its renewal hung, or one lost", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, ctx := range ctxs {
			if ctx.Err() != nil {
				return true, ""
			}
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		return len(store.renewed) == targets, fmt.Sprint(len(store.renewed), " renewed after a hung renewal")
	})
	mu.Lock()
	defer mu.Unlock()
	for target, ctx := range ctxs {
		if ctx.Err() != nil {
			t.Errorf("%s's lease lost while its renewal hung, beside %d others, the budget of extra renewals being %d: %v",
				target, targets-1, scheduler.DefaultExtraRenewals, context.Cause(ctx))
		}
	}
}
