package protocol_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// slowFirstAttempt is a store whose first acquire answers only after the
// wait's deadline passed (an attempt runs to its answer: "ctx's deadline
// bounds the waiting, not an attempt in flight"), the holder letting go
// meanwhile; and whose subscriptions are made whatever the state of the
// caller's ctx, as SQLite's are when its poller is already running (its
// Subscribe selects between the poller's ready channel and ctx.Done).
type slowFirstAttempt struct {
	*protocol.Runtime
	waitCtx  context.Context
	release  func()
	attempts atomic.Int64
}

func (s *slowFirstAttempt) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	n := s.attempts.Add(1)
	res, err := s.Runtime.Acquire(ctx, req)
	if n == 1 {
		s.release()
		<-s.waitCtx.Done()
	}
	return res, err
}

func (s *slowFirstAttempt) Subscribe(_ context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	return s.Runtime.Subscribe(context.Background(), key)
}

// AcquireWait promises: "No attempt is sent once ctx is cancelled (nor,
// after the first, once its deadline passed)", and a wait that runs out
// answers conflict. After the first conflict it subscribes and tries once
// more at once; that extra attempt must not be sent when the deadline
// passed during the first, or the wait takes the key after its caller's
// deadline.
func TestAcquireWaitSendsNoAttemptAfterItsDeadlineWhenItSubscribes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := protocol.Key{Namespace: "wait", Name: t.Name()}
	held, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	s := &slowFirstAttempt{Runtime: rt, waitCtx: waitCtx, release: func() {
		if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "holder", Token: held.Lease.Token}); err != nil {
			t.Error(err)
		}
	}}
	res, err := protocol.AcquireWait(waitCtx, s, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, nil)
	if n := s.attempts.Load(); n != 1 || res.Status == protocol.StatusAcquired {
		t.Fatalf("a wait whose deadline passed during its first attempt sent %d attempts and answered %q (%v); want 1 attempt and conflict matching context.DeadlineExceeded",
			n, res.Status, err)
	}
}
