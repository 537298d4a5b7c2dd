package scheduler_test

import (
	"context"
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
	handlerCtx := make(chan context.Context, 1)
	s, err := scheduler.New(store, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		select {
		case handlerCtx <- ctx:
		default:
		}
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	eventually(t, "holds t", holds(s, "t"))
	ctx := <-handlerCtx
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
