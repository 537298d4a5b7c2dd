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

// hangsOneRenewal passes calls to a store, but once armed, the next
// renewal of target t's lease waits until its context ends and answers
// timeout (a renewal an etcd member holds while the cluster elects a new
// leader); renewed is closed when a later renewal of that lease succeeds.
type hangsOneRenewal struct {
	protocol.Store
	mu      sync.Mutex
	armed   bool
	hung    int64 // the token of the lease whose renewal hung; 0 before
	renewed chan struct{}
}

func (s *hangsOneRenewal) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

func (s *hangsOneRenewal) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	if req.Key.Namespace != scheduler.DefaultNamespace || req.Key.Name != "t" {
		return s.Store.Renew(ctx, req)
	}
	s.mu.Lock()
	hang := s.armed && s.hung == 0
	if hang {
		s.hung = req.Token
	}
	hung := s.hung
	s.mu.Unlock()
	if hang {
		<-ctx.Done()
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout},
			&protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout, Key: req.Key, Message: "the deadline passed", Err: ctx.Err()}
	}
	res, err := s.Store.Renew(ctx, req)
	if err == nil && hung != 0 && req.Token == hung {
		s.mu.Lock()
		select {
		case <-s.renewed:
		default:
			close(s.renewed)
		}
		s.mu.Unlock()
	}
	return res, err
}

// A target's renewal that hangs (the store answers other calls, and a
// second renewal, at once) is tried again while the lease has time left
// by the local clock, as Hold's is (TestHoldRetriesAHungRenewalWhileTheLeaseHasTimeLeft):
// one renewal that never answers must not cost the lease two thirds of
// its TTL early.
func TestHungRenewalIsTriedAgainWhileTheLeaseHasTimeLeft(t *testing.T) {
	t.Parallel()
	store := &hangsOneRenewal{Store: newStore(t), renewed: make(chan struct{})}
	ctx := holdingT(t, store, &scheduler.Config{TTL: ttl})
	store.arm()
	select {
	case <-store.renewed:
	case <-ctx.Done():
		t.Fatalf("t's lease lost after one renewal hung for its timeout, the lease having time left: %v", context.Cause(ctx))
	case <-time.After(waitFor):
		t.Fatal("no renewal of t's lease after the hung one, nor its loss")
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("t's lease renewed after the hung renewal is lost: %v", context.Cause(ctx))
	}
}

// stuckRenewals passes calls to a store, but once armed, every renewal of
// target t's lease of that moment waits until its context ends (a row
// lock another session holds on t's key) and answers timeout late, after
// a further pause (the driver's cancellation coming back); the first
// renewal of u's lease that succeeds after arming closes uRenewed, and
// stuckEnded is closed when the first of t's stuck renewals answered.
type stuckRenewals struct {
	protocol.Store
	late       time.Duration
	mu         sync.Mutex
	stuck      int64 // t's token while armed; 0 before
	uRenewed   chan struct{}
	stuckEnded chan struct{}
	armed      bool
}

func (s *stuckRenewals) arm(token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck, s.armed = token, true
}

func (s *stuckRenewals) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	s.mu.Lock()
	armed, stuck := s.armed, req.Key.Namespace == scheduler.DefaultNamespace && req.Key.Name == "t" && req.Token == s.stuck
	s.mu.Unlock()
	if stuck {
		<-ctx.Done()
		time.Sleep(s.late)
		s.mu.Lock()
		select {
		case <-s.stuckEnded:
		default:
			close(s.stuckEnded)
		}
		s.mu.Unlock()
		return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusTimeout},
			&protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusTimeout, Key: req.Key, Message: "waited for a row lock", Err: ctx.Err()}
	}
	res, err := s.Store.Renew(ctx, req)
	if err == nil && armed && req.Key.Namespace == scheduler.DefaultNamespace && req.Key.Name == "u" {
		s.mu.Lock()
		select {
		case <-s.uRenewed:
		default:
			close(s.uRenewed)
		}
		s.mu.Unlock()
	}
	return res, err
}

// Each lease of a renewal round is handled on its own: a renewal that
// succeeded keeps its lease from when it was sent, even while another
// renewal of the same round is stuck (its key locked) past the leases'
// previous local deadline. Only t, whose renewals never succeed, is lost;
// u and the membership, renewed in the same round, are kept.
func TestRenewedLeaseIsKeptWhileAnotherRenewalOfTheRoundIsStuck(t *testing.T) {
	t.Parallel()
	store := &stuckRenewals{Store: newStore(t), late: ttl / 6, uRenewed: make(chan struct{}), stuckEnded: make(chan struct{})}
	var mu sync.Mutex
	ctxs := map[string]context.Context{}
	tokens := map[string]int64{}
	s, err := scheduler.New(store, "w1", scheduler.Static("t", "u"), func(ctx context.Context, target string, token int64) {
		mu.Lock()
		if ctxs[target] == nil {
			ctxs[target], tokens[target] = ctx, token
		}
		mu.Unlock()
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t and u", holds(s, "t", "u"))
	eventually(t, "t's and u's handlers run", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return ctxs["t"] != nil && ctxs["u"] != nil, fmt.Sprint(len(ctxs), " handlers")
	})
	mu.Lock()
	tCtx, uCtx := ctxs["t"], ctxs["u"]
	store.arm(tokens["t"])
	mu.Unlock()
	<-store.uRenewed
	<-store.stuckEnded
	<-tCtx.Done()
	if uCtx.Err() != nil {
		t.Errorf("u's lease, renewed in the round where t's renewal stuck, is lost: %v", context.Cause(uCtx))
	}
	if !s.Snapshot().Member {
		t.Errorf("the membership, renewed in the round where t's renewal stuck, lapsed: %s", s.Snapshot().Problem)
	}
}

// With ExtraRenewals negative no renewal is sent beside one without an
// answer: a hung renewal costs its lease at its local deadline, as the
// Config documents.
func TestNoExtraRenewalsLeavesAHungRenewalAlone(t *testing.T) {
	t.Parallel()
	store := &hangsOneRenewal{Store: newStore(t), renewed: make(chan struct{})}
	ctx := holdingT(t, store, &scheduler.Config{TTL: ttl, ExtraRenewals: -1})
	store.arm()
	select {
	case <-store.renewed:
		t.Fatal("t's lease renewed beside its hung renewal with ExtraRenewals -1 (none)")
	case <-ctx.Done():
		if cause := context.Cause(ctx); !errors.Is(cause, protocol.ErrLeaseLost) {
			t.Errorf("t's handler ended by %v; want its lease lost by the local clock", cause)
		}
	case <-time.After(waitFor):
		t.Fatal("t's lease neither lost nor renewed after its renewal hung")
	}
}

// holdingT starts a worker w1 of store with cfg whose one target t's
// handler waits for its context's end, waits until it holds t and
// returns that handler's context.
func holdingT(t *testing.T, store protocol.Store, cfg *scheduler.Config) context.Context {
	t.Helper()
	handlerCtx := make(chan context.Context, 1)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		select {
		case handlerCtx <- ctx:
		default:
		}
		<-ctx.Done()
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	return <-handlerCtx
}
