package protocol_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// answersAfterTheDeadline is a store whose acquires answer only some time
// after the wait's deadline passed (a slow store), unless their own
// context ends first.
type answersAfterTheDeadline struct {
	*protocol.Runtime
	waitCtx context.Context
}

func (s *answersAfterTheDeadline) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	<-s.waitCtx.Done()
	select {
	case <-ctx.Done():
		return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, Key: req.Key},
			&protocol.Error{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, Key: req.Key, Err: context.Cause(ctx)}
	case <-time.After(100 * time.Millisecond):
	}
	return s.Runtime.Acquire(ctx, req)
}

// AcquireWait: "ctx's deadline bounds the waiting, not an attempt in
// flight: an attempt runs to its answer". A deadline is a deadline
// whatever cause the caller gave it (context.WithTimeoutCause): the
// attempt in flight must still run to its answer, as it does under a
// plain context.WithTimeout, rather than be cut short as if cancelled.
func TestAcquireWaitDeadlineWithACauseLetsAnAttemptFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	errWaitedEnough := errors.New("waited long enough")
	for _, c := range []struct {
		name string
		make func() (context.Context, context.CancelFunc)
	}{
		{"WithTimeout", func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 20*time.Millisecond) }},
		{"WithTimeoutCause", func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(ctx, 20*time.Millisecond, errWaitedEnough)
		}},
	} {
		waitCtx, cancel := c.make()
		k := protocol.Key{Namespace: "wait", Name: c.name}
		s := &answersAfterTheDeadline{Runtime: rt, waitCtx: waitCtx}
		res, err := protocol.AcquireWait(waitCtx, s, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, nil)
		cancel()
		if res.Status != protocol.StatusAcquired {
			t.Errorf("%s: a wait whose deadline passed while its attempt was in flight answered %q (%v); want the attempt's own answer, acquired",
				c.name, res.Status, err)
		}
	}
}

// A wait that runs out under a deadline given a cause says so ("the
// deadline passed", not "cancelled"), and its error matches both
// context.DeadlineExceeded and the cause.
func TestAcquireWaitDeadlineWithACauseGivesUpAsADeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := protocol.Key{Namespace: "wait", Name: t.Name()}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	errWaitedEnough := errors.New("waited long enough")
	waitCtx, cancel := context.WithTimeoutCause(ctx, 20*time.Millisecond, errWaitedEnough)
	defer cancel()
	res, err := protocol.AcquireWait(waitCtx, rt, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, nil)
	if res.Status != protocol.StatusConflict || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errWaitedEnough) ||
		!strings.Contains(res.Message, "(the deadline passed)") {
		t.Fatalf("a wait run out under context.WithTimeoutCause answered %q, message %q (%v); want conflict saying the deadline passed, matching context.DeadlineExceeded and the cause",
			res.Status, res.Message, err)
	}
}
